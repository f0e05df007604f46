"""Ctrl-C inside a run's block: a flag and a notice, never work on the interrupted thread."""

from __future__ import annotations

import io
import signal

import pytest
from rich.console import Console

from metabench.harness.interrupt import NOTICE, interrupts_at_once, stop_at_iteration_end


class CtrlCOnFirstWrite(io.StringIO):
    """A terminal whose first write is interrupted by Ctrl-C, as a progress line can be."""

    def __init__(self) -> None:
        super().__init__()
        self.interrupted = False

    def write(self, text: str) -> int:
        if not self.interrupted:
            self.interrupted = True
            signal.raise_signal(signal.SIGINT)  # the handler runs here, inside the write
        return super().write(text)


def test_a_ctrl_c_during_a_print_sets_the_flag_and_the_notice_follows_the_line():
    output = CtrlCOnFirstWrite()
    console = Console(file=output, width=120)
    with stop_at_iteration_end(console) as requested:
        console.print("iteration 1")
        stop = requested()
    assert stop
    # a notice printed by the handler itself would run inside the console's write and send
    # the interrupted line twice
    assert output.getvalue().splitlines() == ["iteration 1", NOTICE]


def test_the_second_ctrl_c_interrupts_at_once_and_the_handler_is_restored():
    console, before = Console(file=io.StringIO()), signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), stop_at_iteration_end(console) as requested:
        signal.raise_signal(signal.SIGINT)
        assert requested()
        signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before


def test_without_a_ctrl_c_nothing_is_printed():
    output = io.StringIO()
    with stop_at_iteration_end(Console(file=output)) as requested:
        pass
    assert not requested() and output.getvalue() == ""


def test_after_training_ctrl_c_interrupts_at_once_even_where_sigint_was_ignored():
    """A run started in the background of a script (``cmd &``) inherits SIGINT ignored; it
    stops on it while it trains, and so it does in its final meta-test."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt), interrupts_at_once():
            signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # restored after the block
    finally:
        signal.signal(signal.SIGINT, before)
