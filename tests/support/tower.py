"""A question the default answerability judgment is fooled on and the semantic one is not:
how tall the Eiffel Tower is, asked of passages about the tower that never state its height
(their words, in the question's order, are all the default judgment reads), and the passage
that does. The semantic judgment's own tests and its end-to-end tests share them."""

from __future__ import annotations

__all__ = ["ABOUT_THE_TOWER", "HEIGHT", "TOWER"]

TOWER = "How tall is the Eiffel Tower in metres?"
#: About the tower, never its height.
ABOUT_THE_TOWER = (
    "The Eiffel Tower attracts millions of visitors every year, and the queues at its lifts "
    "can be long in summer.",
    "Tickets for the Eiffel Tower can be bought online; the top floor is closed in strong wind.",
    "At night the Eiffel Tower sparkles with twenty thousand light bulbs for five minutes "
    "every hour.",
)
#: The passage that states it.
HEIGHT = (
    "The Eiffel Tower in Paris is 330 metres tall, including its antennas, and was finished "
    "in 1889."
)
