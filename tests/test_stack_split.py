"""``scripts/stack_split.py``: the split of py-spy's sampled stacks, counted by hand."""

from scripts import stack_split

SAMPLES = """\
<module> (metabench:6);train (a.py:1);chunked_train (c.py:3);Tensor.backward (t.py:4) 30
<module> (metabench:6);train (a.py:1);chunked_train (c.py:3);chunk_pass (c.py:9) 12
<module> (metabench:6);train (a.py:1);collect_rollouts (d.py:5);MetaBatchVecEnv.step_wait (e.py:6) 8
<module> (metabench:6);train (a.py:1);collect_rollouts (d.py:5) 2
Thread._bootstrap (threading.py:1002);Thread.run (threading.py:982);wait (x.py:1) 500
"""


def test_each_main_thread_sample_counts_under_its_first_named_frame(tmp_path):
    path = tmp_path / "main.txt"
    path.write_text(SAMPLES)
    stacks = stack_split.main_thread_stacks(path)
    assert sum(count for _, count in stacks) == 52  # the other thread's 500 left out
    counts = stack_split.split(stacks, ["chunked_train", "step_wait", "collect_rollouts"])
    assert counts == {"chunked_train": 42, "step_wait": 8, "collect_rollouts": 2}
    assert stack_split.split(stacks, ["backward"]) == {"backward": 30, "other": 22}
    inside = stack_split.split_inside(stacks, "chunked_train", 1)
    assert inside == {"Tensor.backward": 30, "chunk_pass": 12}
