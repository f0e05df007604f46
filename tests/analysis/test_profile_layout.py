"""The performance-profile plot keeps its whole title inside the figure."""

from typing import Any

import pytest
from matplotlib.figure import Figure

from metabench.analysis import plots
from tests.factories import make_result


@pytest.mark.parametrize("name", ["HalfCheetahVel", "Bandit", "ML1-push"])
def test_the_profile_subtitle_lies_inside_the_figure(name: str, monkeypatch: Any) -> None:
    figures: list[Figure] = []

    def keep(fig: Figure) -> bytes:
        figures.append(fig)
        return b""

    monkeypatch.setattr(plots, "_png", keep)
    results = [
        make_result(
            name,
            algorithm,
            seed,
            [[-80.0 + 10 * seed + shift, -60.0 + shift]],
            exploration_episodes=1,
        )
        for algorithm, shift in (("maml-trpo", 5.0), ("multitask", 0.0), ("nop", -20.0))
        for seed in range(3)
    ]
    plots.profile_plots(results)
    (fig,) = figures
    fig.canvas.draw()  # lays the figure out as savefig does
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    title = fig.get_suptitle()
    assert title.startswith(f"{name}: performance profile")
    box = fig._suptitle.get_window_extent(renderer)  # type: ignore[attr-defined]
    page = fig.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1, (box, page)
    assert page.y0 <= box.y0 and box.y1 <= page.y1, (box, page)
    # the title does not overlap the panel it names
    assert box.y0 >= fig.axes[0].get_window_extent(renderer).y1
