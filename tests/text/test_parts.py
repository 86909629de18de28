"""The parts of a question asked in parts come from its structure: several question
sentences, or a coordination the segmenter tags; never from a list of words."""

from __future__ import annotations

from external_query_service.text._parts import covers, part_question, question_parts, share

SALES = "2025年比亚迪和特斯拉的销量分别是多少？"


def test_the_parts_of_a_question_come_from_its_coordination_or_its_sentences() -> None:
    parts = question_parts(SALES)
    assert [(part.text, part.by) for part in parts] == [
        ("比亚迪", "coordination"),
        ("特斯拉", "coordination"),
    ]
    assert part_question(SALES, parts, parts[1]) == "2025年特斯拉的销量分别是多少？"
    two = question_parts("新体育馆有多少个座位？2015年中超冠军是谁？")
    assert [part.by for part in two] == ["sentence", "sentence"]
    assert part_question("", two, two[1]) == "2015年中超冠军是谁？"
    assert question_parts("湛江明天天气怎么样？") == ()


def test_a_passage_covers_the_part_whose_own_terms_it_holds() -> None:
    first, second = question_parts("新体育馆有多少个座位？2015年中超冠军是谁？")
    passage = {"体育馆", "座位", "共有"}
    assert covers(first, passage)
    assert not covers(second, passage)
    assert share(first, passage) > share(second, passage) == 0


def test_a_coordination_of_numerals_or_time_words_makes_parts_of_one_class_each() -> None:
    years = "2024年和2025年比亚迪的销量分别是多少"
    parts = question_parts(years)
    assert [part.text for part in parts] == ["2024年", "2025年"]
    # The run stops where the word class changes: 比亚迪 stays in the frame of both.
    assert part_question(years, parts, parts[1]) == "2025年比亚迪的销量分别是多少"
    assert [p.text for p in question_parts("苹果和华为去年的出货量分别是多少")] == ["苹果", "华为"]


def test_a_preposition_joins_as_a_conjunction_only_where_the_question_reads_it_as_one() -> None:
    sales = "2020年甲公司与乙公司的销量分别是多少"
    parts = question_parts(sales)
    assert [part.text for part in parts] == ["甲公司", "乙公司"]
    assert part_question(sales, parts, parts[1]) == "2020年乙公司的销量分别是多少"
    assert [p.text for p in question_parts("北京跟上海的人口分别是多少")] == ["北京", "上海"]
    # The X of B, not of A and B: the two sides are tagged apart, or a verb follows B.
    assert question_parts("苹果在中国的销量是多少") == ()
    assert question_parts("华为与小米合作的项目有哪些") == ()
