"""Meta-World's count of a meta-test, replayed from metabench's per-episode record, on races
worked out by hand (the comparison with Meta-World's own evaluator is in
test_metaworld_adapter.py)."""

import pytest

from metabench.evaluation import TaskResult
from metabench.records import MetaTestRecord, RunResult
from metabench.tasks.metaworld.count import (
    CountedEpisode,
    first_to_end,
    metaworld_count,
    per_goal_count,
)


def hit(step: int, ret: float = 1.0) -> CountedEpisode:
    return CountedEpisode(step, True, ret)


MISS = CountedEpisode(100, False, 50.0)  # a time-limited episode of 100 steps


def test_the_first_episodes_to_end_are_counted_and_successes_end_first():
    fast = [hit(10, 1.0), hit(10, 2.0), hit(10, 3.0)]  # ends at steps 10, 20, 30
    assert first_to_end([[MISS] * 3, fast], 3) == fast
    # one success at step 60 of sub-env 0 (its first episode), then misses (end at 160, 260)
    slow = [hit(60), MISS, MISS]
    assert first_to_end([slow, [MISS] * 3], 3) == [hit(60), MISS, MISS]
    # equal ends (step 100) go in sub-env order: sub-env 0's miss, then sub-env 1's hit
    assert first_to_end([[MISS] * 3, [hit(100, 7.0)] * 3], 2) == [MISS, hit(100, 7.0)]
    with pytest.raises(ValueError, match="fewer than 3"):
        first_to_end([[MISS, MISS]], 3)


def test_rounds_of_each_class_are_averaged_as_metaworld_averages_them():
    episodes = {
        # class a, round 0: one sub-env succeeds at step 5 three times -> 3/3, returns 1
        "a0": [hit(5)] * 3, "a1": [MISS] * 3,
        # class a, round 1: nobody succeeds -> 0/3, returns 50
        "a2": [MISS] * 3, "a3": [MISS] * 3,
        # class b, round 0: b0's second episode succeeds, but ends at step 250; the first
        # three to end are b0's miss (100), b1's miss (100) and b1's second miss (200) -> 0/3
        "b0": [MISS, hit(150, 9.0), MISS], "b1": [MISS] * 3,
    }  # fmt: skip
    classes = [name[0] for name in episodes]
    count = metaworld_count(classes, list(episodes.values()), envs_per_class=2)
    # round 0: class a 1.0, class b 0.0 -> 0.5; round 1: only class a, 0.0 -> mean 0.25
    assert count.success_rate == pytest.approx(0.25)
    assert count.success_rate_per_class == {"a": 0.5, "b": 0.0}
    # returns: round 0: (1+1+1 + 50+50+50) / 6 = 25.5; round 1: 50
    assert count.mean_return == pytest.approx((25.5 + 50.0) / 2)


def test_per_goal_counting_removes_the_head_start_of_early_successes():
    """The race of the test above, counted per goal (Metaworld PR #577): each sub-env's own 3
    episodes, worked out by hand."""
    episodes = {
        "a0": [hit(5)] * 3, "a1": [MISS] * 3,  # round 0: 3/3 and 0/3
        "a2": [MISS] * 3, "a3": [MISS] * 3,  # round 1: 0/3 and 0/3
        "b0": [MISS, hit(150, 9.0), MISS], "b1": [MISS] * 3,  # round 0: 1/3 and 0/3
    }  # fmt: skip
    classes = [name[0] for name in episodes]
    per_goal = per_goal_count(classes, list(episodes.values()), envs_per_class=2)
    # round 0: goals a0, a1, b0, b1 -> (3 + 0 + 1 + 0) / 12; round 1: a2, a3 -> 0
    assert per_goal == pytest.approx((4 / 12 + 0.0) / 2)
    # one sub-env per class and round, as metabench's own fraction of test episodes counts
    fast, slow = [hit(5)] * 3, [MISS, MISS, hit(100)]
    race = [[fast, [MISS] * 3], [slow, [MISS] * 3]]
    for pair in race:
        fraction = sum(e.success for goal in pair for e in goal) / 6
        assert per_goal_count(["a", "a"], pair, envs_per_class=2) == pytest.approx(fraction)
    # Meta-World's count: early successes fill the class's 3 places (1.0 against 0.5), and a
    # success in a goal's last episode ends after them and is never counted (0 against 1/6)
    assert metaworld_count(["a", "a"], race[0], envs_per_class=2).success_rate == 1.0
    assert metaworld_count(["a", "a"], race[1], envs_per_class=2).success_rate == 0.0


def test_meta_test_result_records_metaworld_count_only_with_its_setting():
    def task(index: int, successes: list[bool], steps: list[int | None]) -> TaskResult:
        return TaskResult(
            task_index=index,
            task={"env_name": "reach-v3", "data": str(index)},
            exploration_episodes=1,
            episode_returns=[100.0] * 4,
            episode_lengths=[100] * 4,
            episode_successes=successes,
            episode_success_steps=steps,
            episode_returns_to_success=[100.0 if step is None else float(step) for step in steps],
        )

    tasks = [
        task(0, [False, True, True, True], [None, 20, 20, 20]),
        task(1, [False] * 4, [None] * 4),
    ]
    plain = MetaTestRecord("algo", "env", 1, 3, 0, tuple(tasks))
    assert plain.result.metaworld is None
    assert "metaworld_success_rate" not in plain.to_json()["aggregate"]
    counted = MetaTestRecord("algo", "env", 1, 3, 0, tuple(tasks), metaworld_envs_per_class=2)
    record = counted.to_json()
    # half the test episodes succeed, but task 0's three end first (steps 20, 40, 60)
    assert record["aggregate"]["test_episode_success_rate"] == 0.5
    assert record["aggregate"]["metaworld_success_rate"] == 1.0
    assert record["aggregate"]["metaworld_return"] == 20.0
    assert MetaTestRecord.from_json(record).to_json() == record  # read back, the same


def test_tables_show_metaworlds_count_beside_the_episode_rate_where_it_is_recorded():
    from metabench.analysis.stats import summarize
    from metabench.analysis.tables import summary_csv, summary_markdown
    from tests.factories import make_result

    def result(benchmark: str, seed: int, succeed: set[int], envs: int | None) -> RunResult:
        """8 tasks of one class, one test episode each, those in ``succeed`` succeeding (at
        step 3 of 10): a quarter of the test episodes. Counted by Meta-World with 2 sub-envs a
        round, a round of tasks (0, 1), (2, 3), ... scores where one of its two succeeds."""
        successes = [[False, index in succeed] for index in range(8)]
        return make_result(
            benchmark, "rl2", seed, [[0.0, 1.0]] * 8, exploration_episodes=1,
            successes=successes, metaworld_envs_per_class=envs,
        )  # fmt: skip

    runs = [
        result("ML1", 0, {0, 2}, 2),
        result("ML1", 1, {0, 1}, 2),
        result("Vel", 0, {0, 1}, None),
    ]
    summaries = summarize(runs)
    ml1, vel = summaries
    # seed 0: rounds 1 and 2 of 4 score (0.5); seed 1: round 1 only (0.25)
    assert ml1.metaworld_success is not None and ml1.metaworld_success.mean == 0.375
    assert ml1.test_success is not None and ml1.test_success.mean == 0.25
    assert vel.metaworld_success is None
    page = summary_markdown(summaries)
    ml1_table, vel_table = page.split("### ML1")[1].split("### Vel")
    assert "Meta-World's count |" in ml1_table and "| 0.375 [" in ml1_table
    assert "Meta-World's count" not in vel_table
    rows = summary_csv(summaries).splitlines()
    assert rows[0].endswith("metaworld_success_mean,metaworld_success_low,metaworld_success_high")
    assert rows[1].split(",")[-3] == "0.375" and rows[2].endswith(",,,")


def test_per_goal_count_of_a_shipped_ml10_run_is_its_fraction_of_test_episodes():
    """On the ML10 record of a real run (200 test goals, 40 per class, 3 test episodes each),
    counted per goal, Meta-World's race gives the fraction of test episodes that succeed."""
    import json

    from tests.factories import ROOT

    path = ROOT / "results" / "ML10" / "rl2-ppo-metaworld-2e7-seed0" / "result.json"
    if not path.exists():
        pytest.skip("no ML10 result in this checkout")
    result = MetaTestRecord.from_json(json.loads(path.read_text())["metatest"]).result
    episodes = [t.counted_test_episodes() for t in result.tasks]
    assert result.metaworld_envs_per_class is not None and all(e for e in episodes)
    classes = [t.task["env_name"] for t in result.tasks]
    per_goal = per_goal_count(classes, episodes, result.metaworld_envs_per_class)  # type: ignore[arg-type]
    assert per_goal == pytest.approx(result.test_episode_success_rate)
    assert result.metaworld is not None and result.metaworld.success_rate > per_goal
