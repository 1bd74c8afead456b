import numpy as np
import pytest

from robotmem import Config, ConflictError, Memory, NotFoundError, ValidationError


def test_numeric_arrays_are_stored_as_binary_and_summarised_in_recall(mem: Memory):
    data = {"t": [i * 0.01 for i in range(1000)], "joints": [[float(j)] * 7 for j in range(1000)], "frame": "base"}
    result = mem.save_perception("joint log while pushing the box", "proprioceptive", data=data)
    assert result["payload_bytes"] < 1000 * 8 * 9  # raw float64 + headers, far below JSON text
    hit = mem.recall("pushing box")["results"][0]
    assert hit["payload"]["shape"]["joints"] == {"array": [1000, 7], "dtype": "float64"}
    assert "t" not in hit["context"]
    assert mem.get_data(result["memory_id"]) == data
    arrays = mem.get_data(result["memory_id"], as_numpy=True)
    assert isinstance(arrays["joints"], np.ndarray) and arrays["joints"].shape == (1000, 7)


def test_data_given_as_json_text_is_parsed(mem: Memory):
    mid = mem.save_perception("force profile of the grasp", "tactile", data='{"f": [1, 2, 3]}')["memory_id"]
    assert mem.get_data(mid) == {"f": [1, 2, 3]}


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"description": "abcd"}, "description"),
        ({"description": "valid text", "perception_type": "smell"}, "perception_type"),
        ({"description": "valid text", "metadata": "[]"}, "metadata"),
        ({"description": "valid text", "data": "{broken"}, "data"),
    ],
)
def test_save_perception_rejects_bad_input_naming_the_field(mem: Memory, kwargs, field):
    with pytest.raises(ValidationError) as info:
        mem.save_perception(**kwargs)
    assert info.value.field == field


def test_oversized_payload_is_rejected_with_the_limit_in_the_message(db_path, clock, robotmem_home):
    config = Config.load(max_payload_bytes=10_000)
    with Memory(db_path, clock=clock, embedder=None, config=config) as mem:
        with pytest.raises(ValidationError) as info:
            mem.save_perception("a very large image", "visual", data={"pixels": list(range(5000))})
        assert info.value.field == "data" and "10000" in info.value.message
        assert mem.stats()["memories"] == 0


def test_bulk_save_is_all_or_nothing(mem: Memory):
    records = [{"description": "good record one"}, {"description": "bad", "perception_type": "visual"}]
    with pytest.raises(ValidationError) as info:
        mem.save_perceptions(records)
    assert info.value.field == "records[1].description"
    assert mem.stats()["memories"] == 0


def test_every_field_error_of_a_batch_record_names_the_record(mem: Memory):
    # perception_type, session_id and collection were named bare, unlike description or embed
    ended = mem.start_session(collection="lab")["session_id"]
    mem.end_session(ended)
    ok = {"description": "camera frame zero"}
    bad = [({"perception_type": "smell"}, ValidationError, "records[1].perception_type"),
           ({"session_id": "no such id!"}, ValidationError, "records[1].session_id"),
           ({"session_id": "ses_doesnotexist"}, NotFoundError, "records[1].session_id"),
           ({"session_id": ended, "collection": "kitchen"}, ValidationError, "records[1].collection"),
           ({"session_id": ended}, ConflictError, "records[1].session_id"),
           ({"collection": "bad name!"}, ValidationError, "records[1].collection")]
    for fields, error, field in bad:
        with pytest.raises(error) as info:
            mem.save_perceptions([ok, {"description": "camera frame one", **fields}])
        assert info.value.field == field, (fields, info.value)
    with pytest.raises(ValidationError) as info:
        mem.save_perception("camera frame one", "smell")
    assert info.value.field == "perception_type"  # a single perception keeps the bare name
    assert mem.stats()["memories"] == 0


def test_binary_bytes_round_trip_as_base64(mem: Memory):
    mid = mem.save_perception("thumbnail of the shelf", "visual", data={"png": b"\x89PNG\r\n"})["memory_id"]
    assert mem.get_data(mid) == {"png": {"base64": "iVBORw0K", "bytes": 6}}
    assert mem.get_data(mid, as_numpy=True)["png"] == b"\x89PNG\r\n"


def test_bulk_records_can_skip_embedding(hybrid_mem):
    ids = hybrid_mem.save_perceptions([
        {"description": "pose trajectory /odom 10.0 s 3.2 m", "perception_type": "proprioceptive", "embed": False},
        {"description": "episode summary: drove to the kitchen", "perception_type": "procedural"},
    ])
    conn = hybrid_mem._db.connection()
    with_vectors = [row[0] for row in conn.execute("SELECT memory_id FROM embeddings ORDER BY memory_id")]
    assert with_vectors == [ids[1]]
    assert hybrid_mem.recall("trajectory odom")["results"][0]["id"] == ids[0]
    with pytest.raises(ValidationError) as info:
        hybrid_mem.save_perceptions([{"description": "valid text", "embed": "no"}])
    assert info.value.field == "records[0].embed"


def test_get_data_many_returns_what_get_data_returns_for_each_id(mem: Memory):
    with_arrays = mem.save_perception("joint log", "proprioceptive", data={"q": [[0.1, 0.2], [0.3, 0.4]]})["memory_id"]
    with_text = mem.save_perception("a note with data", "tactile", data={"label": "slip", "f": [1.5]})["memory_id"]
    without = mem.save_perception("a camera frame without data", "visual")["memory_id"]
    fact = mem.learn("grip_force=9N held the bottle")["memory_id"]
    mem.forget(with_text, "sensor fault")
    ids = [with_arrays, with_text, without, fact, with_arrays]  # a repeated id is answered once
    many = mem.get_data_many(ids)
    assert list(many) == [with_arrays, with_text, without, fact]
    assert many == {mid: mem.get_data(mid) for mid in ids}
    assert many[without] is None and many[fact] is None
    arrays = mem.get_data_many([with_arrays], as_numpy=True)[with_arrays]
    assert isinstance(arrays["q"], np.ndarray) and arrays["q"].shape == (2, 2)
    assert mem.get_data_many([]) == {}
    assert mem.get_data_many(iter([fact, without])) == {fact: None, without: None}  # any iterable of ids


def test_get_data_many_reads_more_ids_than_one_statement_takes(mem: Memory):
    ids = mem.save_perceptions([{"description": f"force sample {i}", "perception_type": "tactile",
                                 "data": {"fz": [float(i)]}, "embed": False} for i in range(2500)])
    many = mem.get_data_many(list(reversed(ids)))
    assert list(many) == list(reversed(ids))
    assert all(many[mid] == {"fz": [float(i)]} for i, mid in enumerate(ids))


@pytest.mark.parametrize("ids, error, field", [
    ("12", ValidationError, "memory_ids"),
    (12, ValidationError, "memory_ids"),
    ({1: 2}, ValidationError, "memory_ids"),
    ([1, "x"], ValidationError, "memory_ids[1]"),
    ([0], ValidationError, "memory_ids[0]"),
    ([True], ValidationError, "memory_ids[0]"),
])
def test_get_data_many_refuses_what_is_not_a_list_of_ids(mem: Memory, ids, error, field):
    with pytest.raises(error) as info:
        mem.get_data_many(ids)
    assert info.value.field == field


def test_get_data_many_names_an_unknown_id_and_returns_nothing(mem: Memory):
    mid = mem.save_perception("force profile", "tactile", data={"f": [1.0]})["memory_id"]
    with pytest.raises(NotFoundError) as info:
        mem.get_data_many([mid, mid + 1000])
    assert info.value.field == "memory_ids" and str(mid + 1000) in str(info.value)


NON_FINITE_DATA = {"f": float("inf"), "g": float("-inf"), "h": float("nan"), "x": 1.5,
                   "scan": [1.0, float("inf"), float("nan"), float("-inf")], "rows": [[float("nan"), 1.0], [2.0, 3.0]],
                   "deep": {"r": float("inf")}}


def _same(a, b) -> bool:
    """Equal, NaN included (NaN != NaN)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return a == b or (a != a and b != b)


def test_non_finite_numbers_are_kept_in_data_and_summarised_as_strict_json(mem: Memory):
    """Lasers report inf and sensors NaN: the payload keeps them, the summary a hit carries names
    them ({"float": "inf"}) instead of holding a number json.dumps writes as Infinity."""
    import json

    mid = mem.save_perception("laser scan with inf readings", data=NON_FINITE_DATA)["memory_id"]
    bare = mem.save_perception("a sensor reported nan alone", data=float("nan"))["memory_id"]
    result = mem.recall("", since=0, min_relevance=0)
    json.dumps(result, allow_nan=False)  # strict JSON: no NaN / Infinity tokens
    shapes = {hit["id"]: hit["payload"]["shape"] for hit in result["results"]}
    assert shapes[mid] == {"f": {"float": "inf"}, "g": {"float": "-inf"}, "h": {"float": "nan"}, "x": 1.5,
                           "scan": {"array": [4], "dtype": "float64"}, "rows": {"array": [2, 2], "dtype": "float64"},
                           "deep": {"r": {"float": "inf"}}}
    assert shapes[bare] == {"float": "nan"}
    assert _same(mem.get_data(mid), NON_FINITE_DATA)
    assert mem.get_data(bare) != mem.get_data(bare)  # NaN itself


def test_a_word_longer_than_postgresqls_lexeme_limit_is_stored_and_found_on_both_backends(mem: Memory):
    # 1,100 letters, 2,200 bytes in UTF-8: PostgreSQL refuses a lexeme of more than 2,046 bytes,
    # so robotmem's tokens cut it there for both backends' full text (a base64 blob in a log line too).
    word = "ж" * 1100
    first = mem.save_perception(word, "visual")["memory_id"]
    ids = mem.save_perceptions([{"description": "camera frame 1"}, {"description": word},
                                {"description": "camera frame 3"}])
    fact = mem.learn(f"token {word[:290]}")["memory_id"]
    assert {h["id"] for h in mem.recall(word, min_relevance=0)["results"]} == {ids[1], first}
    assert {h["id"] for h in mem.recall(word[:290], min_relevance=0)["results"]} == {fact}
    assert mem.outcome_stats("x", query=word)["matched"] == 2


def _arrays_read_by_msgpack(blob: bytes) -> dict:
    """A stored payload's arrays read as the format is written (msgpack ext 1: a [dtype, shape]
    header, then the values), with msgpack's own Unpacker and no robotmem code."""
    import msgpack

    def ext(code: int, data: bytes) -> np.ndarray:
        unpacker = msgpack.Unpacker(raw=False)
        unpacker.feed(data)
        dtype, shape = unpacker.unpack()
        return np.frombuffer(data[unpacker.tell():], dtype=np.dtype(dtype)).reshape(shape)

    return msgpack.unpackb(blob, ext_hook=ext, raw=False)


def test_stored_arrays_read_back_as_msgpack_reads_them_and_small_ones_without_an_unpacker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A pose chunk's three arrays were read with an Unpacker each, half the time of decoding it
    (300,000 arrays for a 100,000-chunk episode page). Headers of other forms (a dimension of 128
    or more, more than 15 dimensions) are read by the Unpacker still."""
    import msgpack

    from robotmem import payload

    arrays = {"ints": np.arange(5, dtype="<i4"), "long": np.arange(300.0),
              "cube": np.arange(60.0).reshape(3, 4, 5), "empty": np.zeros(0), "wide": np.ones((130, 2), "u1"),
              "deep": np.zeros((1,) * 16), "big_endian": np.arange(6, dtype=">f4").reshape(2, 3),
              "flags": np.array([True, False])}
    small = {"t": np.arange(10) * 0.1, "x": np.ones(10), "y": np.zeros(10)}
    blobs = {name: payload.encode_payload({name: a}, max_bytes=10**7) for name, a in {**arrays, **small}.items()}
    made: list[int] = []
    real = msgpack.Unpacker
    monkeypatch.setattr(payload.msgpack, "Unpacker", lambda *a, **k: made.append(1) or real(*a, **k))
    for name, blob in blobs.items():
        read, expected = payload.decode_payload(blob)[name], _arrays_read_by_msgpack(blob)[name]
        assert (read.dtype, read.shape, read.tobytes()) == (expected.dtype, expected.shape, expected.tobytes()), name
        assert not read.flags.writeable
    made.clear()
    payload.decode_payload(payload.encode_payload(small, max_bytes=10**6))
    assert made == []
