import json
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robotmem import Config, ConfigError
from robotmem.config import redact_url


def test_defaults_put_the_store_in_robotmem_home(robotmem_home: Path):
    config = Config.load()
    assert config.home == robotmem_home
    assert config.database == robotmem_home / "memory.db"
    assert config.model_cache == robotmem_home / "models" or config.models_dir is not None


def test_explicit_beats_environment_beats_file(robotmem_home: Path, monkeypatch: pytest.MonkeyPatch):
    (robotmem_home / "config.json").write_text(json.dumps({"half_life_days": 10, "collection": "file"}))
    assert Config.load().half_life_days == 10.0
    monkeypatch.setenv("ROBOTMEM_HALF_LIFE_DAYS", "20")
    assert Config.load().half_life_days == 20.0
    assert Config.load().collection == "file"
    assert Config.load(half_life_days=40).half_life_days == 40.0


def test_unknown_option_in_the_config_file_is_a_config_error(robotmem_home: Path):
    (robotmem_home / "config.json").write_text(json.dumps({"halflife": 3}))
    with pytest.raises(ConfigError, match="halflife"):
        Config.load()


def test_unparseable_environment_value_names_the_option(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ROBOTMEM_MAX_PAYLOAD_BYTES", "lots")
    with pytest.raises(ConfigError, match="max_payload_bytes"):
        Config.load()


@pytest.mark.parametrize(("variable", "value"), [
    ("ROBOTMEM_HALF_LIFE_DAYS", "-3"),  # confidence grew without bound (8.06 after 10 days)
    ("ROBOTMEM_HALF_LIFE_DAYS", "0"),  # divided by zero: every memory dropped out of recall
    ("ROBOTMEM_HALF_LIFE_DAYS", "nan"),
    ("ROBOTMEM_ARCHIVE_FLOOR", "5"),
    ("ROBOTMEM_INITIAL_CONFIDENCE", "7"),
    ("ROBOTMEM_MAX_CONFIDENCE", "0"),
    ("ROBOTMEM_REINFORCE_STEP", "-0.1"),
    ("ROBOTMEM_MAX_PAYLOAD_BYTES", "0"),
    ("ROBOTMEM_BUSY_TIMEOUT_MS", "-1"),
    ("ROBOTMEM_PARAM_REL_TOLERANCE", "inf"),
])
def test_an_out_of_range_value_names_the_option_and_its_range(variable: str, value: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(variable, value)
    option = variable.removeprefix("ROBOTMEM_").lower()
    with pytest.raises(ConfigError, match=f"'{option}' \\({variable}\\) must be"):
        Config.load()


@pytest.mark.parametrize("value", ["2147483648", "99999999999999999999"])
def test_a_busy_timeout_beyond_a_c_int_is_a_config_error_naming_the_largest(
        value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # SQLite raised a raw OverflowError when the store opened; PostgreSQL took it
    monkeypatch.setenv("ROBOTMEM_BUSY_TIMEOUT_MS", value)
    with pytest.raises(ConfigError, match="'busy_timeout_ms' .* at most 2147483647, got"):
        Config.load()


def test_the_largest_busy_timeout_opens_a_sqlite_store(tmp_path: Path) -> None:
    from robotmem import Memory
    with Memory(tmp_path / "m.db", embedder=None, config=Config.load(busy_timeout_ms=2**31 - 1)) as mem:
        assert mem.learn("the largest busy timeout still opens the store")["status"] == "created"


def test_a_new_memory_cannot_start_below_the_archive_floor() -> None:
    with pytest.raises(ConfigError, match="archive_floor < initial_confidence <= max_confidence"):
        Config.load(archive_floor=0.9)
    with pytest.raises(ConfigError, match="archive_floor < initial_confidence <= max_confidence"):
        Config.load(initial_confidence=0.995)


def test_a_merge_threshold_above_one_switches_merging_off_and_is_allowed() -> None:
    assert Config.load(merge_cosine=1.5, merge_text_similarity=1.5).merge_cosine == 1.5


@pytest.mark.parametrize("setting", ["home", "db_path", "models_dir"])
def test_a_path_that_is_not_utf8_is_a_config_error_naming_the_setting(tmp_path: Path, setting: str):
    # os.fsdecode(b"\xff.db"): how such a name arrives from argv or the environment.
    with pytest.raises(ConfigError, match=r"\\xff") as info:
        Config.load(**{setting: str(tmp_path / "\udcff.db")})
    assert info.value.field == setting


@pytest.mark.parametrize("name", ["\ud83d.db", "a\x00.db"])
@pytest.mark.parametrize("setting", ["home", "db_path", "models_dir"])
def test_a_path_no_file_can_have_is_a_config_error_naming_the_setting(tmp_path: Path, setting: str, name: str):
    # A surrogate that stands for no byte crashed the UTF-8 check itself (UnicodeEncodeError).
    with pytest.raises(ConfigError) as info:
        Config.load(**{setting: str(tmp_path / name)})
    assert info.value.field == setting


FLEET_URL = "postgresql://fleet@db.lab/fleet"


@pytest.mark.parametrize("where", ["environment", "config.json"])
def test_an_explicit_file_wins_over_a_url_that_was_not_given_explicitly(
        robotmem_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    if where == "environment":
        monkeypatch.setenv("ROBOTMEM_URL", FLEET_URL)
    else:
        (robotmem_home / "config.json").write_text(json.dumps({"url": FLEET_URL}))
    assert Config.load().store_location == FLEET_URL  # nothing explicit: the fleet database
    small = tmp_path / "small.db"
    config = Config.load(db_path=small)
    assert config.url is None and config.store_location == small
    other = "postgresql://other@db.lab/other"  # an explicit url still wins over an explicit file
    assert Config.load(db_path=small, url=other).store_location == other


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://admin2@127.0.0.1:55432/fleet?password=SuperPW9", "postgresql://admin2@127.0.0.1:55432/fleet?password=***"),
    ("postgresql://u:Super%40PW9@db.lab/fleet", "postgresql://u:***@db.lab/fleet"),
    # libpq decodes parameter names too, and takes ? and # into the password of user:password@
    ("postgresql://u@db.lab/fleet?pass%77ord=SuperPW9", "postgresql://u@db.lab/fleet?pass%77ord=***"),
    ("postgresql://u:Super?PW#9@db.lab/fleet", "postgresql://u:***@db.lab/fleet"),
    ("postgresql://u@db.lab/fleet?password=Super#PW9", "postgresql://u@db.lab/fleet?password=***"),
    ("postgres://u@h/db?sslmode=require&sslpassword=k%26ey&application_name=r7",
     "postgres://u@h/db?sslmode=require&sslpassword=***&application_name=r7"),
    ("postgresql://u@h/db?oauth_client_secret=SuperPW9&PASSWORD=SuperPW9", "postgresql://u@h/db?oauth_client_secret=***&PASSWORD=***"),
    ("postgresql://u:pw@h1:5432,h2:5433/db?target_session_attrs=read-write",
     "postgresql://u:***@h1:5432,h2:5433/db?target_session_attrs=read-write"),
    ("postgresql://db.lab?password=Super@PW9", "postgresql://db.lab?password=***"),  # libpq: user db.lab?password=Super
    ("postgresql://u:SuperPW9@[::1/db", "postgresql://u:***@[::1/db"),  # unparseable: still redacted, no ValueError
    ("postgresql://robotmem@db.lab/robotmem?host=/run/pg&sslmode=require", "postgresql://robotmem@db.lab/robotmem?host=/run/pg&sslmode=require"),
])
def test_redact_url_hides_every_secret_libpq_reads(url: str, shown: str) -> None:
    assert redact_url(url) == shown


_PASSWORD_NAMES = st.sampled_from(["password", "sslpassword", "pass%77ord", "%73slpassword"])


@settings(max_examples=300, deadline=None)
@given(secret=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=30),
       name=_PASSWORD_NAMES,
       where=st.sampled_from(["userinfo", "query"]))
def test_redact_url_leaves_exactly_the_secret_out_as_libpq_parses_it(secret: str, name: str, where: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    encoded = quote(secret, safe="")
    if where == "userinfo":
        url = f"postgresql://robot:{encoded}@db.lab:5432/fleet?application_name=r7&connect_timeout=3"
    else:
        url = f"postgresql://robot@db.lab:5432/fleet?application_name=r7&{name}={encoded}&connect_timeout=3"
    parsed = conninfo_to_dict(url)
    key = "password" if where == "userinfo" else unquote(name)
    assert parsed[key] == secret
    assert conninfo_to_dict(redact_url(url)) == {**parsed, key: "***"}


@settings(max_examples=200, deadline=None)
@given(secret=st.text(st.characters(blacklist_categories=("Cs", "Cc", "Z"), blacklist_characters="@/%"), min_size=1,
                      max_size=30))
def test_redact_url_hides_a_password_typed_without_percent_encoding(secret: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    url = f"postgresql://robot:{secret}@db.lab/fleet"
    assert conninfo_to_dict(url)["password"] == secret  # libpq's reading: up to the @
    assert redact_url(url) == "postgresql://robot:***@db.lab/fleet"


@pytest.mark.parametrize("url", [
    "postgresql://u:SuperPW9@[::1/db",  # was an uncaught ValueError "Invalid IPv6 URL"
    "postgresql://u:Super%zzPW9@db.lab/fleet",  # libpq quotes the token it cannot decode
    "postgresql://u@db.lab/fleet?password=Super%zzPW9",
    "postgresql://u@db.lab/fleet?password=SuperPW9&bogus",
    "postgresql://u:Super%00PW9@db.lab/fleet",
])
def test_a_url_that_cannot_be_parsed_is_a_config_error_naming_url_without_the_password(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        Config.load(url=url)
    assert info.value.field == "url" and "is not a valid PostgreSQL URL" in info.value.message
    assert "PW9" not in info.value.message and info.value.__suppress_context__


def test_robotmem_url_that_is_not_postgresql_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROBOTMEM_URL", "mysql://u:SuperPW9@db.lab/fleet")
    with pytest.raises(ConfigError, match="must be a PostgreSQL URL") as info:
        Config.load()
    assert info.value.field == "url" and "SuperPW9" not in info.value.message


def test_the_configuration_table_in_the_docs_lists_every_key():
    # embedding_model was documented only in embeddings.md; a reader of the table never found it
    import dataclasses
    import re

    doc = (Path(__file__).resolve().parents[2] / "docs" / "data-model.md").read_text(encoding="utf-8")
    table = doc.split("\n## Configuration\n", 1)[1]
    listed = set(re.findall(r"`(\w+)`", "\n".join(line.split("|")[1] for line in table.splitlines()
                                                   if line.startswith("| `"))))
    keys = {field.name for field in dataclasses.fields(Config)} - {"home"}  # home is ROBOTMEM_HOME itself
    assert keys - listed == set() and listed - keys == set()


def test_the_defaults_the_docs_tables_give_are_configs_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Rows ``| `key` | default | ...`` of data-model.md's and consolidation.md's tables, for the
    defaults that are plain numbers or words (paths are checked elsewhere)."""
    import os
    import re

    for name in [n for n in os.environ if n.startswith("ROBOTMEM_")]:
        monkeypatch.delenv(name)
    config = Config.load(home=str(tmp_path))
    docs = Path(__file__).resolve().parents[2] / "docs"
    checked = 0
    for document in ("data-model.md", "consolidation.md"):
        for key, shown in re.findall(r"^\| `(\w+)` \| `?([\w.+-]+)`? \|", (docs / document).read_text(encoding="utf-8"),
                                     re.MULTILINE):
            if not hasattr(config, key) or shown == "none":
                continue
            value = getattr(config, key)
            assert (float(shown) == value) if isinstance(value, (int, float)) else (shown == value), (document, key)
            checked += 1
    assert checked >= 14
