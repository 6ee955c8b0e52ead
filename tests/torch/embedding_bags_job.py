"""zps.torch.EmbeddingBags checked exactly, in a job of 1 worker and 2 servers (tests/torch/dlrm_test.sh bags):
lookups of [bags, tables] ids and of per-table ids and offsets (sum, then mean) against the same rows pooled by
hand, the tables kept apart (equal ids of two tables are two rows), and one SGD step (lr 0.5) moving
each row by exactly lr x the summed gradient of its uses (backward leaves its push in flight; the next
lookup waits for it). Prints "bags ok" when all hold."""
import torch

import zps.torch as bps


def main():
    bps.init()
    dim, tables = 4, 3
    bags = bps.EmbeddingBags(tables, dim, name="bags", optimizer="sgd", lr=0.5, init_scale=0.5)
    ids = torch.tensor([[0, 7, 7], [5, 7, 1 << 39]])
    with torch.no_grad():
        before = bags(ids)
        # Row (t, i) of the table: looked up alone, one id per bag.
        row = {(t, int(ids[b, t])): before[b, t].clone() for b in range(2) for t in range(tables)}
    assert before.shape == (2, tables, dim), before.shape
    assert not torch.equal(before[0, 1], before[0, 2]), "id 7 of tables 1 and 2 is one row"
    assert torch.equal(before[0, 1], before[1, 1]), "id 7 of table 1 gave two rows"

    # Per-table ids and offsets, 2 bags each: table 0 {0, 5} {5}, table 1 {7} {}, table 2 {7, 7} {2^39}.
    table_ids = [torch.tensor([0, 5, 5]), torch.tensor([7]), torch.tensor([7, 7, 1 << 39])]
    offsets = [torch.tensor([0, 2]), torch.tensor([0, 1]), torch.tensor([0, 2])]
    zero = torch.zeros(dim)
    expected_sum = torch.stack([
        torch.stack([row[0, 0] + row[0, 5], row[1, 7], row[2, 7] * 2]),
        torch.stack([row[0, 5], zero, row[2, 1 << 39]])])
    expected_mean = torch.stack([
        torch.stack([(row[0, 0] + row[0, 5]) / 2, row[1, 7], row[2, 7]]),
        torch.stack([row[0, 5], zero, row[2, 1 << 39]])])
    with torch.no_grad():
        assert torch.allclose(bags(table_ids, offsets), expected_sum, rtol=0, atol=1e-6), "sum pooling differs"
        bags.mode = "mean"
        assert torch.allclose(bags(table_ids, offsets), expected_mean, rtol=0, atol=1e-6), "mean pooling differs"
        bags.mode = "sum"

    # One step: loss = sum(out * w), so row (t, i) gets w summed over its uses.
    w = torch.arange(2 * tables * dim, dtype=torch.float32).reshape(2, tables, dim) / 10
    (bags(ids) * w).sum().backward()
    # Backward started the push and went on; the next lookup waits for it, so it sees the step.
    assert bags.table._push_in_flight is not None, "backward waited for its push"
    with torch.no_grad():
        after = bags(ids)
    assert bags.table._push_in_flight is None, "the lookup after backward did not wait for its push"
    for (t, i), old in row.items():
        grad = sum(w[b, t] for b in range(2) if int(ids[b, t]) == i)
        b = [b for b in range(2) if int(ids[b, t]) == i][0]
        assert torch.allclose(after[b, t], old - 0.5 * grad, rtol=0, atol=1e-6), (t, i, after[b, t], old - 0.5 * grad)
    for bad in (torch.tensor([[-1, 0, 0]]), torch.tensor([[1 << 40, 0, 0]])):
        try:
            bags(bad)
        except ValueError as e:
            assert "[0, 2^40)" in str(e), e
        else:
            raise AssertionError("ids %s were accepted" % bad.tolist())
    print("bags ok", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
