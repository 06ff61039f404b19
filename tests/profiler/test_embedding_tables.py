"""Embedding tables in training. Rows a step does not look up keep a zero gradient, so Adam
leaves their second moment at exactly zero: ``ModelProfile.untouched_table_elements`` counts
them. A table with ``sparse=True`` has a sparse gradient, which SGD steps and Adam refuses."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import aiadvisor as aa


class Tagger(nn.Module):
    """A 1,000 x 8 table, a 64-row learned position table and a head."""

    def __init__(self, *, tie: bool = False, sparse: bool = False, bag: bool = False):
        super().__init__()
        table = nn.EmbeddingBag if bag else nn.Embedding
        self.embed = table(1000, 8, sparse=sparse, **({"mode": "sum"} if bag else {}))
        self.pos = nn.Embedding(64, 8)
        self.head = nn.Linear(8, 1000, bias=False)
        if tie:
            self.head.weight = self.embed.weight
        self.bag = bag

    def forward(self, ids):
        x = self.embed(ids)
        if self.bag:
            return self.head(x)
        x = x + self.pos(torch.arange(ids.shape[1]))
        return self.head(x)


def _ids(batch: int, seq: int = 16):
    return torch.randint(0, 1000, (batch, seq), generator=torch.Generator().manual_seed(0))


def test_untouched_rows_by_hand():
    prof = aa.profile(Tagger(), _ids(4), mode="train", optimizer="adamw")
    # 4 x 16 = 64 indices drawn from 1,000 rows: a row is missed with probability
    # 0.999^64 = 0.937975, so 1,000 x 8 x 0.937975 = 7,503.8 elements. The position table
    # (64 rows) reaches its first 16: (64 - 16) x 8 = 384 more.
    assert prof.untouched_table_elements == pytest.approx(7504 + 384, abs=1)
    # Twice the batch: 128 indices, 0.999^128 = 0.879797: 7,038.4; positions unchanged.
    assert prof.at(batch_size=8).untouched_table_elements == pytest.approx(7038 + 384, abs=1)


def test_tables_whose_every_row_gets_a_gradient_or_none_count_nothing():
    ids = _ids(4)
    # A head tied to the table gives every row a gradient; only the position table is left.
    assert aa.profile(Tagger(tie=True), ids, mode="train").untouched_table_elements == 384
    # sparse=True: a sparse gradient (SparseAdam's case), not zero rows of a dense one.
    from aiadvisor.profiler import _dense_grad_tables

    assert set(_dense_grad_tables(Tagger(sparse=True))) == {"pos"}
    assert set(_dense_grad_tables(Tagger())) == {"embed", "pos"}
    frozen = Tagger()
    frozen.embed.weight.requires_grad_(False)
    assert aa.profile(frozen, ids, mode="train").untouched_table_elements == 384
    # Inference has no optimizer state.
    assert aa.profile(Tagger(), ids, mode="infer").untouched_table_elements == 0


def test_embedding_bag_lookups_count_every_index():
    # EmbeddingBag over (4, 16) indices: 64 lookups, as above (no position table in this path).
    prof = aa.profile(Tagger(bag=True), _ids(4), mode="train", optimizer="adamw")
    assert prof.untouched_table_elements == pytest.approx(7504, abs=1)


def test_a_sparse_table_is_sized_by_its_lookups():
    model = Tagger(sparse=True, bag=True)
    prof = aa.profile(model, _ids(4), mode="train", optimizer="sgd", measure=True,
                      measure_steps=2)
    # The bag's gradient: one row per lookup, uncoalesced, with its int64 index: 64 x (8 x 4
    # + 8) = 2,560 bytes, not the table's 32,000. The other trainable tensors count dense:
    # the head 1,000 x 8 x 4 = 32,000 and the (unused) position table 64 x 8 x 4 = 2,048.
    assert prof.memory.grads_bytes == 2_560 + 32_000 + 2_048
    # SGD updates the 64 looked-up rows, not the 1,000: 16,512 - (1,000 - 64) x 8 = 9,024
    # elements, 2 FLOPs each.
    (step,) = [o for o in prof.ops if o.phase == "optimizer"]
    assert step.flops == pytest.approx(2 * 9_024)
    # The lookup reads the rows it gathers (64 x 32 bytes) and its indices and offsets, not
    # the table.
    (bag,) = [o for o in prof.ops if o.op == "aten._embedding_bag"]
    assert bag.bytes_read == 64 * 32 + 64 * 8 + 4 * 8
    (note,) = [n for n in prof.notes if "sparse=True" in n]
    assert "'embed'" in note and "one row per lookup" in note
    assert prof.untouched_table_elements == 0
    # The measured steps (weights, gradients, no optimizer state) agree within 10 %.
    assert prof.measured_peak_bytes == pytest.approx(prof.memory.peak_bytes, rel=0.1)
    assert model.embed.weight.grad is None   # the user's model is left as it was
    # With momentum PyTorch appends each step's gradient to a sparse buffer: the note says it
    # grows, the state is counted at one step's size.
    momentum = aa.profile(Tagger(sparse=True, bag=True), _ids(4), mode="train",
                          optimizer="sgd_momentum")
    assert momentum.memory.optimizer_bytes == 2_560 + 32_000 + 2_048
    assert any("grows by one step's gradient every step" in n for n in momentum.notes)


@pytest.mark.parametrize("optimizer", ["adam", "adamw"])
def test_adam_on_a_sparse_table_is_refused_like_torch_does(optimizer):
    with pytest.raises(aa.errors.InvalidArgumentError,
                       match=rf"optimizer='{optimizer}' cannot step the sparse gradient of "
                             r"'embed'.*Expected optimizer='sgd' or 'sgd_momentum'"):
        aa.profile(Tagger(sparse=True), _ids(4), mode="train", optimizer=optimizer)
    # Inference has no gradient: fine.
    prof = aa.profile(Tagger(sparse=True), _ids(4), mode="infer")
    assert prof.num_params == 1000 * 8 * 2 + 64 * 8


def test_advice_with_default_arguments_assumes_sgd_for_sparse_embeddings():
    # %advise with no optimizer: AdamW cannot step the sparse table, so SGD is assumed and a
    # note says why; asking for AdamW explicitly is refused as above.
    report = aa.advise(Tagger(sparse=True), _ids(4))
    assert report.profile.optimizer == "sgd"
    assert any("optimizer 'sgd' assumed" in n and "'embed'" in n for n in report.profile.notes)
    assert aa.advise(Tagger(), _ids(4)).profile.optimizer == "adamw"
    with pytest.raises(aa.errors.InvalidArgumentError, match="cannot step the sparse gradient"):
        aa.advise(Tagger(sparse=True), _ids(4), optimizer="adamw")


def test_pytorch_appends_each_sparse_gradient_to_the_momentum_buffer():
    # What the sgd_momentum note says, checked on the installed PyTorch: 8 bags of 4 indices a
    # step, and the buffer holds 32, 64, 96 entries after three steps (uncoalesced).
    table = nn.EmbeddingBag(1000, 4, sparse=True, mode="sum")
    opt = torch.optim.SGD(table.parameters(), lr=0.1, momentum=0.9)
    sizes = []
    for _ in range(3):
        table(torch.randint(0, 1000, (8, 4))).sum().backward()
        assert table.weight.grad._nnz() == 32
        opt.step()
        opt.zero_grad()
        sizes.append(opt.state[table.weight]["momentum_buffer"]._nnz())
    assert sizes == [32, 64, 96]
