"""A one-line notice from a widget or screen: the console's status line when the App has one
(``CotalApp.notify_line``), else Textual's toast - the widgets also run in plain Apps."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from textual.dom import DOMNode


@runtime_checkable
class NoticeLine(Protocol):
    """An App with a status line for notices."""

    def notify_line(self, text: str, error: bool = False) -> None: ...


def say_line(node: DOMNode, text: str, error: bool = False) -> None:
    app = node.app
    if isinstance(app, NoticeLine):
        app.notify_line(text, error)
    else:
        app.notify(text, severity="error" if error else "information")
