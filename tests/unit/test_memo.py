"""The bounded memo behind the parsed-expression and generated-join memos."""

import threading

import pytest

from jumpgate.dataflow.memo import BoundedMemo


def test_forgets_the_least_recently_used_entry():
    memo: BoundedMemo[str, int] = BoundedMemo(2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.get("a") == 1  # "a" is now the most recent, so "b" goes first
    memo.put("c", 3)
    assert memo.get("b") is None
    assert memo.get("a") == 1 and memo.get("c") == 3
    assert len(memo) == 2


def test_putting_a_known_key_again_replaces_it_and_makes_it_recent():
    memo: BoundedMemo[str, int] = BoundedMemo(2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.put("a", 10) == 10
    memo.put("c", 3)
    assert memo.get("a") == 10 and memo.get("b") is None


def test_keeps_at_least_one_entry():
    with pytest.raises(ValueError, match="at least one"):
        BoundedMemo(0)


def test_stays_within_its_bound_under_threads():
    memo: BoundedMemo[tuple[int, int], int] = BoundedMemo(50)

    def work(t: int) -> None:
        for i in range(2000):
            memo.put((t, i), i)
            memo.get((t, i - 1))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(memo) == 50
