"""Recording readers in the shape of mcap's Python reader.

``iter_messages(topics=None, start_time=None, end_time=None)`` yields
:class:`~bridges.pipeline.messages.RosMessage` in log-time order; ``start_time`` /
``end_time`` are integer nanoseconds of *log* time (inclusive / exclusive, as in mcap).

* :class:`RosbagsReader` - rosbags' AnyReader: ROS 1 ``.bag`` files and ROS 2 bag folders
  (``metadata.yaml`` + sqlite3 ``.db3`` or ``.mcap`` storage). No ROS install needed.
* :class:`McapFileReader` - a plain ``.mcap`` file (no ``metadata.yaml``): the ``mcap``
  package reads the records, rosbags' typestore (built from the schemas in the file)
  decodes CDR (ros2msg / ros2idl) and ROS 1 (ros1msg) payloads. rosbags' generated
  deserialisers are several times faster than mcap-ros2-support's dynamic decoder.

Message definitions: those stored in the recording are used; a type the recording does
not define (Humble-era rosbag2 sqlite3 folders store none) is decoded with the standard
definitions of a ROS 2 distribution (``ros_distro``, default Humble; rosbags ships them).
``type_sources`` says which were used.

Message time: the header stamp, else the log time. Whether a stamp is believed is the
pipeline's rule (bridges/pipeline/stamps.py), the same for replay and the live bridge: the
reader hands on both times.
"""

from __future__ import annotations

import inspect
import logging
import struct
from datetime import datetime, timezone
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

if TYPE_CHECKING:
    from typing_extensions import Self

from bridges.pipeline.messages import (
    RosMessage,
    header_stamp_ns,
    normalize_msgtype,
    to_plain,
)
from bridges.replay.distros import DEFAULT_ROS_DISTRO, ROS_DISTROS

log = logging.getLogger("bridges.replay")

__all__ = ["DEFAULT_ROS_DISTRO", "ROS_DISTROS", "McapFileReader", "RecordingDamaged", "RecordingError", "RecordingReader",
           "RosbagsReader", "TopicInfo", "distro_typestore", "open_reader", "without_metadata"]

#: (connection or channel, log time, payload) as the reading libraries give them
_Raw = tuple[Any, int, bytes]


class RecordingError(Exception):
    """A recording cannot be opened or decoded (names the file)."""


class ChannelUndecodable(Exception):
    """No message of a channel can be decoded (its encoding or its schema), the reason in words."""


class RecordingDamaged(RecordingError):
    """A recording that opened cannot be read on: a damaged chunk or record part-way through.

    ``messages`` were read before the damage; ``log_ns`` is the log time of the last of them."""

    def __init__(self, text: str, messages: int, log_ns: int | None) -> None:
        super().__init__(text)
        self.messages = messages
        self.log_ns = log_ns


def _utc(t_ns: int) -> str:
    return datetime.fromtimestamp(t_ns / 1e9, tz=timezone.utc).isoformat(timespec="milliseconds")


def _reason(exc: BaseException) -> str:
    """The library's words, or its exception's name when it gives none (mcap's EndOfFile())."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(frozen=True)
class TopicInfo:
    msgtype: str
    #: messages on the topic (None when the file has no index to tell)
    count: int | None


def distro_typestore(distro: str) -> Any:
    """rosbags' typestore of a ROS 2 distribution's standard messages."""
    from rosbags.typesys import Stores, get_typestore

    if distro not in ROS_DISTROS:
        raise RecordingError(f"ros_distro: expected one of {', '.join(ROS_DISTROS)}, got {distro!r}")
    return get_typestore(getattr(Stores, f"ROS2_{distro.upper()}"))


class RecordingReader(Protocol):
    path: Path

    undecodable: dict[str, int]
    undecodable_reason: dict[str, str]
    #: "recording" / "<distro> standard definitions" -> the types decoded with them
    type_sources: dict[str, list[str]]

    def topics(self) -> dict[str, TopicInfo]: ...

    def iter_messages(
        self, topics: Iterable[str] | None = None, start_time: int | None = None, end_time: int | None = None
    ) -> Iterator[RosMessage]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class _ReaderBase:
    path: Path
    #: messages per topic whose payload could not be decoded (skipped, logged)
    undecodable: dict[str, int]
    #: why, for the first of them per topic
    undecodable_reason: dict[str, str]
    type_sources: dict[str, list[str]]

    def _init_common(self, path: Path) -> None:
        self.path = Path(path)
        self.undecodable = {}
        self.undecodable_reason = {}
        self.type_sources = {}

    def _message(self, topic: str, msgtype: str, data: dict[str, Any], log_ns: int) -> RosMessage:
        """The message at its stamp, or at its log time when it has none."""
        stamp = header_stamp_ns(data)
        return RosMessage(topic, msgtype, stamp if stamp > 0 else log_ns, data, log_ns)

    def _read_on(self, records: Iterator[_Raw]) -> Iterator[_Raw]:
        """The reading library's (item, log time, payload) records; a failure part-way through
        becomes RecordingDamaged, naming how far the file was read.

        Anything the library raises while reading on is the file's fault (a zeroed chunk: rosbags'
        ReaderError, zstandard's ZstdError, a struct.error from a cut record, ...): the libraries
        share no exception type, so every Exception is taken. The caller keeps what was read
        before (docs/replay.md: the damaged recording's earlier episodes are stored and ended)."""
        count, last_ns = 0, None
        while True:
            try:
                item = next(records)
            except StopIteration:
                return
            except Exception as exc:  # noqa: BLE001 - see above
                where = "before its first message" if last_ns is None else (
                    f"after {count} messages (the last logged at {_utc(last_ns)})")
                raise RecordingDamaged(f"{self.path}: damaged, reading stopped {where}: {_reason(exc)}",
                                       count, last_ns) from exc
            count, last_ns = count + 1, item[1]
            yield item

    def _undecodable(self, topic: str, log_ns: int, exc: Exception) -> None:
        """A corrupt payload costs one message, not the whole recording."""
        count = self.undecodable[topic] = self.undecodable.get(topic, 0) + 1
        whole_channel = isinstance(exc, ChannelUndecodable)
        self.undecodable_reason.setdefault(topic, str(exc) if whole_channel else _reason(exc))
        if count <= (1 if whole_channel else 5):  # a whole channel: the same reason for every message
            log.warning("%s: cannot decode %s at %d, skipped: %s", self.path, topic, log_ns, exc)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError


class RosbagsReader(_ReaderBase):
    """ROS 1 bags and ROS 2 bag folders through rosbags.highlevel.AnyReader."""

    def __init__(self, path: Path, ros_distro: str = DEFAULT_ROS_DISTRO) -> None:
        from rosbags.highlevel import AnyReader, AnyReaderError

        self._init_common(path)
        standard = distro_typestore(ros_distro)
        try:
            self._reader = AnyReader([self.path], default_typestore=standard)
            self._reader.open()
        except (AnyReaderError, FileNotFoundError) as exc:
            raise RecordingError(f"{self.path}: cannot open recording: {exc}") from exc
        typestore = self._reader.typestore
        if self._reader.is2:
            self._fill_missing_types(typestore, standard, ros_distro)
        else:
            self.type_sources = {"recording": sorted({c.msgtype for c in self._reader.connections})}
        self._decode = typestore.deserialize_cdr if self._reader.is2 else typestore.deserialize_ros1

    def _fill_missing_types(self, typestore: Any, standard: Any, distro: str) -> None:
        """Types the recording defines keep its definitions; the others take the distribution's."""
        from rosbags.interfaces import MessageDefinitionFormat

        stored = {c.msgtype for c in self._reader.connections if c.msgdef.format != MessageDefinitionFormat.NONE}
        used = sorted({c.msgtype for c in self._reader.connections})
        borrowed = [t for t in used if t not in stored]
        if stored and borrowed:  # rosbags uses the default typestore only when nothing is defined
            typestore.register({k: v for k, v in standard.fielddefs.items() if k not in typestore.fielddefs})
        if stored:
            self.type_sources["recording"] = [t for t in used if t in stored]
        if borrowed:
            self.type_sources[f"ROS 2 {distro} standard definitions"] = borrowed

    def topics(self) -> dict[str, TopicInfo]:
        return {
            name: TopicInfo(normalize_msgtype(info.msgtype) if info.msgtype else "", info.msgcount)
            for name, info in self._reader.topics.items()
        }

    def iter_messages(
        self, topics: Iterable[str] | None = None, start_time: int | None = None, end_time: int | None = None
    ) -> Iterator[RosMessage]:
        wanted = None if topics is None else set(topics)
        connections = [c for c in self._reader.connections if wanted is None or c.topic in wanted]
        if wanted is not None and not connections:
            return
        decode = self._decode
        msgtypes = {id(c): normalize_msgtype(c.msgtype) for c in connections}
        for connection, log_ns, raw in self._read_on(self._reader.messages(connections, start=start_time,
                                                                           stop=end_time)):
            try:
                data = to_plain(decode(raw, connection.msgtype))
            except Exception as exc:  # noqa: BLE001 - rosbags raises several types for corrupt payloads
                self._undecodable(connection.topic, log_ns, exc)
                continue
            yield self._message(connection.topic, msgtypes[id(connection)], data, log_ns)

    def close(self) -> None:
        if self._reader.stack is not None:
            self._reader.close()


class McapFileReader(_ReaderBase):
    """A plain MCAP file: mcap records, rosbags-typestore decoding."""

    def __init__(self, path: Path, ros_distro: str = DEFAULT_ROS_DISTRO) -> None:
        from mcap.exceptions import McapError
        from mcap.reader import make_reader

        self._init_common(path)
        self._distro = ros_distro
        distro_typestore(ros_distro)  # a bad name fails before the file is opened
        self._file: BinaryIO = open(self.path, "rb")  # noqa: SIM115 - closed in close()
        try:
            # CRCs checked: a chunk whose bytes changed after it was written is damage, not data
            self._reader = make_reader(self._file, validate_crcs=True)
            self._summary = self._reader.get_summary()
        except (McapError, ValueError, OSError, struct.error) as exc:  # struct.error: a file shorter than a header
            self._file.close()
            raise RecordingError(f"{self.path}: {_mcap_damage(self.path, exc)}") from exc
        self._decoders: dict[int, Callable[[bytes], Any]] = {}
        self._msgtypes: dict[int, str] = {}
        #: channel id -> schema, as a file without a summary gives them while it is read
        self._schemas: dict[int, Any] = {}
        self._typestore: Any = None

    def topics(self) -> dict[str, TopicInfo]:
        if self._summary is None or not self._summary.channels:
            return self._scan_topics()
        counts = self._summary.statistics.channel_message_counts if self._summary.statistics else {}
        result: dict[str, TopicInfo] = {}
        for channel in self._summary.channels.values():
            schema = self._summary.schemas.get(channel.schema_id)
            # the statistics list only channels with messages: a channel missing there has none
            count = counts.get(channel.id, 0) if self._summary.statistics else None
            previous = result.get(channel.topic)
            if previous is not None and previous.count is not None and count is not None:
                count += previous.count
            result[channel.topic] = TopicInfo(_schema_msgtype(schema), count)
        return result

    def _scan_topics(self) -> dict[str, TopicInfo]:
        """A file without a summary: read it once to count. Damage part-way through leaves the
        counts unknown (None); the topics seen before it are still replayed, and reading them
        stops at the same damage (RecordingDamaged, what came before stored)."""
        counts: dict[str, int] = {}
        types: dict[str, str] = {}
        damaged = False
        try:
            for schema, channel, _ in self._linear_records(None, None, None):
                counts[channel.topic] = counts.get(channel.topic, 0) + 1
                types[channel.topic] = _schema_msgtype(schema)
        except Exception:  # noqa: BLE001 - any failure of the reading libraries is the file's damage (_read_on)
            damaged = True
        return {t: TopicInfo(types[t], None if damaged else counts[t]) for t in counts}

    def _linear_records(self, topics: list[str] | None, start_time: int | None,
                        end_time: int | None) -> Iterator[tuple[Any, Any, Any]]:
        """(schema, channel, message) in file order, read linearly with CRCs checked: a file without
        a chunk index (mcap's seeking reader falls back to this, but without checking CRCs)."""
        from mcap.reader import NonSeekingReader

        self._file.seek(0)
        reader = NonSeekingReader(self._file, validate_crcs=True)
        for schema, channel, message in reader.iter_messages(
                topics=topics, log_time_order=False, starting_at=start_time, ending_before=end_time):
            self._schemas.setdefault(channel.id, schema)
            yield schema, channel, message

    def _linear_messages(self, topics: list[str] | None, start_time: int | None,
                         end_time: int | None) -> Iterator[tuple[Any, int, bytes]]:
        """A file without a chunk index, in log-time order: everything up to any damage is read and
        sorted, then yielded, then the damage is raised (so what came before it is kept)."""
        read: list[tuple[Any, int, bytes]] = []
        try:
            for schema, channel, message in self._linear_records(topics, start_time, end_time):
                self._msgtypes.setdefault(channel.id, _schema_msgtype(schema))
                read.append((channel, message.log_time, message.data))
        except Exception:
            read.sort(key=_log_time)
            yield from read
            raise
        read.sort(key=_log_time)
        yield from read

    def iter_messages(
        self, topics: Iterable[str] | None = None, start_time: int | None = None, end_time: int | None = None
    ) -> Iterator[RosMessage]:
        wanted = None if topics is None else list(topics)
        if wanted is not None and not wanted:
            return
        for channel, log_time, raw in self._read_on(self._raw_messages(wanted, start_time, end_time)):
            decode = self._decoders.get(channel.id)
            if decode is None:
                decode = self._decoders[channel.id] = self._channel_decoder(channel)
            try:
                data = decode(raw)
            except Exception as exc:  # noqa: BLE001 - decoders raise several types for corrupt payloads
                self._undecodable(channel.topic, log_time, exc)
                continue
            yield self._message(channel.topic, self._msgtypes[channel.id], data, log_time)

    def _channel_decoder(self, channel: Any) -> Callable[[bytes], dict[str, Any]]:
        """The channel's payload -> plain dict. A channel replay cannot decode (an encoding other than
        cdr, ros1 or json; a schema that is empty and not a standard type, or does not parse) gets a
        decoder that refuses every message with the reason, so each is counted as undecodable for
        its topic (docs/replay.md) and the rest of the recording is replayed."""
        try:
            decode = self._decoder_for(self._schema(channel), channel)
        except Exception as exc:  # noqa: BLE001 - rosbags' parsers raise several types for a bad definition
            return _refuse(f"its message definition cannot be used: {_reason(exc)}")
        if decode is None:
            return _refuse(f"message encoding {channel.message_encoding!r} is not one replay decodes "
                           "(cdr, ros1, json)")
        return decode

    def _raw_messages(
        self, topics: list[str] | None, start_time: int | None, end_time: int | None
    ) -> Iterator[tuple[Any, int, bytes]]:
        """(channel, log_time, payload) in log-time order: the fast chunk scan when the file allows it."""
        from .mcap_chunks import iter_raw_messages

        summary = self._summary
        if summary is None or not summary.chunk_indexes or not summary.channels:
            # no index to seek with (or channels only in the data section): read the file through
            yield from self._linear_messages(topics, start_time, end_time)
            return
        channels = {cid: ch for cid, ch in summary.channels.items() if topics is None or ch.topic in topics}
        self._msgtypes.update({cid: _schema_msgtype(self._schema(ch)) for cid, ch in channels.items()})
        fast = iter_raw_messages(self._file, summary, set(channels), start_time, end_time) if channels else None
        if fast is not None:
            for log_time, channel_id, raw in fast:
                yield channels[channel_id], log_time, raw
            return
        for schema, channel, message in self._reader.iter_messages(
            topics=topics, log_time_order=True, **self._window(start_time, end_time)
        ):
            self._msgtypes.setdefault(channel.id, _schema_msgtype(schema))
            yield channel, message.log_time, message.data

    def _schema(self, channel: Any) -> Any:
        if self._summary is not None and channel.schema_id in self._summary.schemas:
            return self._summary.schemas[channel.schema_id]
        return self._schemas.get(channel.id)

    def _window(self, start_time: int | None, end_time: int | None) -> dict[str, Any]:
        """mcap >= 1.6 names the half-open window starting_at / ending_before; older: start/end_time."""
        window: dict[str, Any] = {}
        new_names = "starting_at" in inspect.signature(self._reader.iter_messages).parameters
        if start_time is not None:
            window["starting_at" if new_names else "start_time"] = start_time
        if end_time is not None:
            window["ending_before" if new_names else "end_time"] = end_time
        return window

    def _decoder_for(self, schema: Any, channel: Any) -> Callable[[bytes], dict[str, Any]] | None:
        from rosbags.typesys import get_types_from_idl, get_types_from_msg

        if channel.message_encoding == "json":
            return _json_object  # with or without a (JSON) schema: the payload says it all
        if schema is None or channel.message_encoding not in ("cdr", "ros1"):
            return None
        name = normalize_msgtype(schema.name)
        text = schema.data.decode("utf-8")
        store = self._store()
        if name not in store.fielddefs and not text.strip() and channel.message_encoding == "cdr":
            self._borrow(store, name)
        elif name not in store.fielddefs:
            self.type_sources.setdefault("recording", []).append(name)
            if schema.encoding in ("ros2msg", "ros1msg"):
                store.register(get_types_from_msg(text, name))
            elif schema.encoding == "ros2idl":
                store.register(_types_from_idl_bundle(text, get_types_from_idl))
            else:
                return None
        if channel.message_encoding == "ros1":
            return lambda raw: to_plain(store.deserialize_ros1(raw, name))
        return lambda raw: to_plain(store.deserialize_cdr(raw, name))

    def _borrow(self, store: Any, name: str) -> None:
        """A schema without a definition: the distribution's standard one (with its dependencies)."""
        standard = distro_typestore(self._distro)
        if name not in standard.fielddefs:
            raise KeyError(f"{name} is neither defined in the recording nor a standard ROS 2 {self._distro} type")
        store.register({k: v for k, v in standard.fielddefs.items() if k not in store.fielddefs})
        self.type_sources.setdefault(f"ROS 2 {self._distro} standard definitions", []).append(name)

    def _store(self) -> Any:
        if self._typestore is None:
            from rosbags.typesys import Stores, get_typestore

            self._typestore = get_typestore(Stores.EMPTY)
        return self._typestore

    def close(self) -> None:
        self._file.close()


def _log_time(record: tuple[Any, int, bytes]) -> int:
    return record[1]


def _json_object(raw: bytes) -> dict[str, Any]:
    """A JSON-encoded MCAP message (mcap's "json" message encoding): an object, as a ROS message is."""
    import json

    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError(f"a JSON message must be an object, got {type(data).__name__}")
    return data


def _refuse(reason: str) -> Callable[[bytes], dict[str, Any]]:
    def refuse(raw: bytes) -> dict[str, Any]:
        raise ChannelUndecodable(reason)

    return refuse


def _types_from_idl_bundle(text: str, parse: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """ros2idl schemas concatenate several IDL files separated by '=====...' + 'IDL: name' lines."""
    separator = "=" * 80 + "\n"
    if not text.startswith(separator):
        return parse(text)
    types: dict[str, Any] = {}
    for part in text.split(separator)[1:]:
        _, _, body = part.partition("\n")
        types.update(parse(body))
    return types


#: an MCAP file starts and ends with these bytes (the MCAP specification, "Magic")
_MCAP_MAGIC = b"\x89MCAP0\r\n"


def _mcap_damage(path: Path, exc: Exception) -> str:
    """What is wrong with an MCAP file mcap cannot open, in a user's words. mcap's own errors
    describe the byte it tripped on ("unknown (opcode 57) record has length 1449...", or
    EndOfFile() with no words at all), not the file: its end, where the summary and the
    footer live, says whether it was cut short or its index is damaged."""
    with open(path, "rb") as handle:
        head = handle.read(len(_MCAP_MAGIC))
        size = handle.seek(0, 2)
        handle.seek(max(0, size - len(_MCAP_MAGIC)))
        tail = handle.read()
    if head != _MCAP_MAGIC:
        return "not an MCAP file: it does not start with MCAP's magic bytes"
    if size < 2 * len(_MCAP_MAGIC) or tail != _MCAP_MAGIC:
        return ("truncated: it does not end with MCAP's closing magic bytes, so its summary and index are "
                "missing (the recorder stopped without closing it, or the copy is partial)")
    return ("its summary or chunk index is damaged: they point outside the file or at records that are "
            f"not there (bytes were lost or overwritten after it was written; {_reason(exc)})")


def _schema_msgtype(schema: Any) -> str:
    if schema is None or not schema.name:
        return ""
    try:
        return normalize_msgtype(schema.name)
    except ValueError:
        return str(schema.name)


def without_metadata(folder: Path) -> str:
    """Why a folder without a metadata.yaml is not read (rosbag2 writes it when recording ends;
    ``ros2 bag reindex`` rebuilds it from the storage files)."""
    return (f"{folder}: a folder is a ROS 2 bag only with a metadata.yaml (a recording that did not end "
            f"cleanly has none: `ros2 bag reindex {folder}` writes it)")


def open_reader(path: Path, ros_distro: str = DEFAULT_ROS_DISTRO) -> RosbagsReader | McapFileReader:
    """The reader for a recording: a ``.bag`` file, a ROS 2 bag folder, or a plain ``.mcap`` file."""
    path = Path(path)
    if path.is_dir():
        if not (path / "metadata.yaml").exists():
            raise RecordingError(without_metadata(path))
        return RosbagsReader(path, ros_distro)
    if path.suffix == ".bag":
        return RosbagsReader(path, ros_distro)
    if path.suffix == ".mcap":
        return McapFileReader(path, ros_distro)
    if path.suffix == ".db3" and (path.parent / "metadata.yaml").exists():
        return RosbagsReader(path.parent, ros_distro)
    raise RecordingError(f"{path}: not a recording (expected a .bag, a .mcap or a ROS 2 bag folder)")
