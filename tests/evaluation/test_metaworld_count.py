"""Meta-World's count of a meta-test, replayed from metabench's per-episode record, on races
worked out by hand (the comparison with Meta-World's own evaluator is in
test_metaworld_adapter.py)."""

import pytest

from metabench.evaluation import MetaTestResult, TaskResult
from metabench.evaluation.metaworld_count import CountedEpisode, first_to_end, metaworld_count


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
    plain = MetaTestResult("algo", "env", 1, 3, 0, tasks)
    assert plain.metaworld is None and "metaworld_success_rate" not in plain.to_dict()["aggregate"]
    counted = MetaTestResult("algo", "env", 1, 3, 0, tasks, metaworld_envs_per_class=2)
    record = counted.to_dict()
    # half the test episodes succeed, but task 0's three end first (steps 20, 40, 60)
    assert record["aggregate"]["test_episode_success_rate"] == 0.5
    assert record["aggregate"]["metaworld_success_rate"] == 1.0
    assert record["aggregate"]["metaworld_return"] == 20.0
    assert MetaTestResult.from_dict(record).to_dict() == record  # read back, the same


def test_tables_show_metaworlds_count_beside_the_episode_rate_where_it_is_recorded():
    from metabench.harness.stats import summarize
    from metabench.harness.tables import summary_csv, summary_markdown

    def result(benchmark: str, seed: int, counted: float | None) -> dict:
        aggregate = {
            "test_return": 1.0,
            "test_episode_success_rate": 0.25,
            "return_per_episode": [0.0, 1.0],
        }
        if counted is not None:
            aggregate["metaworld_success_rate"] = counted
        tasks = [{"episode_returns": [0.0, 1.0]}]
        metatest = {"aggregate": aggregate, "exploration_episodes": 1, "tasks": tasks}
        return {
            "config": {"benchmark": benchmark, "algorithm": "rl2", "seed": seed},
            "env_steps": 10, "wall_time_s": 1.0, "metatrain": {}, "metatest": metatest,
        }  # fmt: skip

    summaries = summarize([result("ML1", 0, 0.5), result("ML1", 1, 0.75), result("Vel", 0, None)])
    ml1, vel = summaries
    assert ml1.metaworld_success is not None and ml1.metaworld_success.mean == 0.625
    assert ml1.test_success is not None and ml1.test_success.mean == 0.25
    assert vel.metaworld_success is None
    page = summary_markdown(summaries)
    ml1_table, vel_table = page.split("### ML1")[1].split("### Vel")
    assert "Meta-World's count |" in ml1_table and "| 0.625 [" in ml1_table
    assert "Meta-World's count" not in vel_table
    rows = summary_csv(summaries).splitlines()
    assert rows[0].endswith("metaworld_success_mean,metaworld_success_low,metaworld_success_high")
    assert rows[1].split(",")[-3] == "0.625" and rows[2].endswith(",,,")
