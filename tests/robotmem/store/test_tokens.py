from hypothesis import given
from hypothesis import strategies as st

from robotmem.store.tokens import TOKEN_MAX_BYTES, fts_match_expression, index_tokens, query_tokens


def test_decimal_with_unit_is_one_token_and_also_its_parts():
    tokens = index_tokens("grip at 12.5N and lift 0.05m").split()
    assert {"12.5n", "12.5", "n", "0.05m", "0.05"} <= set(tokens)


def test_snake_case_parameter_is_indexed_whole_and_split():
    tokens = index_tokens("grip_force too high").split()
    assert {"grip_force", "grip", "force"} <= set(tokens)


def test_chinese_is_indexed_as_characters_and_bigrams():
    tokens = index_tokens("抓取玻璃瓶").split()
    assert {"玻璃", "璃瓶", "抓取", "瓶"} <= set(tokens)


def test_accents_fold_but_kana_voicing_marks_stay():
    assert index_tokens("Café") == "cafe"
    assert "ボ" in index_tokens("ロボット").split()


@given(st.text(max_size=80))
def test_any_query_gives_a_quoted_expression_or_none(text):
    expression = fts_match_expression(text)
    if expression is None:
        assert query_tokens(text) == []
    else:
        for part in expression.replace("(", "").replace(")", "").split(" OR "):
            assert part.startswith('"') and part.endswith('"')


def test_search_text_adds_the_context_identifiers_the_content_lacks():
    from robotmem.store.tokens import memory_search_text

    context = {"hardware": {"part": "RG2-FT-0417"}, "robot": {"type": "arm", "model": "ur5e"},
               "software": {"firmware": "3.2.1"}, "params": {"grip_force": 12.5}, "tags": ["SN-88213", "wet"]}
    tokens = memory_search_text("the wrist sensor drifted", context).split()
    assert tokens[:4] == "the wrist sensor drifted".split()
    for token in ("rg2", "ft", "-0417", "ur5e", "3.2.1", "sn", "-88213"):
        assert token in tokens
    # plain words are categories (filters select them), numbers are not strings
    assert "arm" not in tokens and "wet" not in tokens and "12.5" not in tokens


def test_search_text_does_not_repeat_what_the_content_already_says():
    from robotmem.store.tokens import index_tokens, memory_search_text

    text = "motor MD-220-L overheated on firmware 3.2.1"
    assert memory_search_text(text, {"part": "MD-220-L", "firmware": "3.2.1"}) == index_tokens(text)
    assert memory_search_text(text, None) == index_tokens(text)
    assert memory_search_text(text, {"note": "x" * 80 + "7"}) == index_tokens(text)  # long strings are prose


def test_identifier_key_words_are_the_keys_holding_identifiers_with_their_parts():
    from robotmem.store.tokens import identifier_key_words

    context = {"hardware": {"serial_number": "SN-88213", "part": "RG2-FT-0417"}, "robot": {"type": "arm", "model": "ur5e"},
               "software": {"firmware": "3.2.1"}, "params": {"grip_force": 12.5}, "tags": ["SN-1", "wet"],
               "note": "x" * 80 + "7"}
    # the key of a list's identifiers is the list's; a number, a plain word or prose names nothing
    assert identifier_key_words(context) == {"serial_number", "serial", "number", "part", "model", "firmware", "tags"}
    assert identifier_key_words({"robot": {"type": "arm"}, "params": {"grip_force": 12.5}}) == set()
    assert identifier_key_words(None) == set() == identifier_key_words({})


def test_a_word_longer_than_postgresqls_lexeme_limit_is_cut_alike_in_the_index_and_the_query():
    # 1,100 Cyrillic letters are 2,200 bytes; PostgreSQL takes lexemes of at most 2,046.
    word = "ж" * 1100
    indexed = index_tokens(f"grip {word} slipped")
    assert indexed == f"grip {'ж' * 1023} slipped" and len("ж".encode()) * 1023 == TOKEN_MAX_BYTES
    assert query_tokens(word) == ["ж" * 1023]
    # cut at a character boundary, never inside a multi-byte letter
    assert query_tokens("a" + "ж" * 1100) == ["a" + "ж" * 1022]
    # folding can lengthen a word past the limit ("ﬃ" is "ffi"): cut after folding
    assert query_tokens("ﬃ" * 700) == [("ffi" * 700)[:TOKEN_MAX_BYTES]]
    assert query_tokens("q" * 1999) == ["q" * 1999]
