"""The genre test (gate=rubric_genre): an answer must read as an answer, not as a text about one.

A pair (X, Y) of agent a is scored teacher-forced in a's zero-shot chat, once after its own question X
and once after each request for a review of a reply to X (REVIEWS, rendered by the prompt template like
a question):

    g = log P(Y | X) / |Y| - mean_r log P(Y | review_r(X)) / |Y|

in nats per token, and the pair passes when g > margin. Praise of an answer, however it is worded, is
the kind of text a review request is answered with, so it is likelier there than after the question;
an answer is the other way round. The test reads no words of the answer: it compares where the
backbone expects the text. 1 + len(REVIEWS) scored passes, no decoding. What it cannot see:
docs/concepts/gates.md, "An answer must read as an answer".
"""

from ms.gates.question_dependence import ContrastTest

# Written for this test alone: a reply to X talked about rather than given. Fixed before any check ran.
REVIEWS = (
    'Someone was asked: "{question}" Write a few sentences of feedback on the reply they gave.',
    'Write a short review of a reply to this request: "{question}"',
)


class GenreTest(ContrastTest):
    """`margin`: the gate's (ms.gates.settings.RubricGenreSettings)."""

    what = "answer over review"
    over = "review requests"

    def contrasts(self, agent: str, question: str) -> list[str]:
        return [review.format(question=question) for review in REVIEWS]
