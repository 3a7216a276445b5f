"""docs/architecture.md shows a real EXPLAIN output; this keeps it current."""

from pathlib import Path

from dsms import Engine

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def test_explain_in_architecture_doc_is_current():
    eng = Engine()
    eng.execute("REGISTER STREAM Bid (item_id INT, price FLOAT, bidder STRING)")
    eng.execute("REGISTER RELATION Item (id INT, category STRING)")
    q1 = eng.execute("SELECT ISTREAM(item_id, COUNT(*) AS n) FROM Bid [RANGE 1 HOUR] GROUP BY item_id "
                     "HAVING COUNT(*) > 10")
    q2 = eng.execute("SELECT B.item_id, I.category FROM Bid [RANGE 1 HOUR] B, Item I WHERE B.item_id = I.id "
                     "AND I.category = 'books'")
    text = eng.explain(q1.id) + "\n" + eng.explain(q2.id)
    assert text in DOC.read_text(), "update the EXPLAIN block in docs/architecture.md:\n" + text
    assert "[shared by q1, q2]" in text
