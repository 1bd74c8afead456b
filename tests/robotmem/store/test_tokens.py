from hypothesis import given
from hypothesis import strategies as st

from robotmem.store.tokens import fts_match_expression, index_tokens, query_tokens


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
