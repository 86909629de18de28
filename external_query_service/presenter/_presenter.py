"""The presenter stage as one object: the extractive presenter, and the optional model hook.

``Presenter.present`` is the extractive answer (templates over quoted evidence; no I/O, no
model). ``Presenter.apresent`` asks the model when one is configured (``model``, which falls
back on the extractive answer whenever its text fails a check) and is the extractive answer
otherwise. The service calls ``apresent`` for every question it works on, and ``present``
for one it sheds before any model work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..models import ExternalContextPacket, Presentation
from ._extractive import ExtractivePresenter

if TYPE_CHECKING:
    from ._model import ModelPresenter

__all__ = ["Presenter"]


class Presenter:
    """``ExternalContextPacket`` → ``Presentation``: the extractive presenter, and a model
    presenter when a model is configured (it falls back on the same extractive one)."""

    def __init__(
        self,
        extractive: ExtractivePresenter | None = None,
        *,
        model: ModelPresenter | None = None,
    ) -> None:
        self.extractive = extractive if extractive is not None else ExtractivePresenter()
        #: The model hook (None: every answer is extractive).
        self.model = model

    def load_templates(self) -> None:
        """Compile the extractive presenter's templates now (``warm_up``)."""
        self.extractive.load_templates()

    def present(self, packet: ExternalContextPacket) -> Presentation:
        """The extractive answer for ``packet``: no model is asked."""
        return self.extractive.present(packet)

    async def apresent(self, packet: ExternalContextPacket) -> Presentation:
        """The answer for ``packet``: the model's when one is configured (falling back on
        the extractive answer), else the extractive one."""
        if self.model is None:
            return self.extractive.present(packet)
        return await self.model.present(packet)
