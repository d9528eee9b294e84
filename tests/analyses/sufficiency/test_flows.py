from __future__ import annotations

import numpy as np
import pytest
import torch

from flare_core.analyses.sufficiency.flow_model import (
    ConditionedMADE,
    FlowConfig,
    _made_transforms,
    branches,
    make_conditional,
)
from flare_core.analyses.sufficiency.flows import FlowEstimator
from tests.properties import assert_finite, assert_shape


def _trained_marginal(flow: str = "maf"):
    rng = np.random.default_rng(0)
    v = rng.standard_normal((200, 5)).astype(np.float32)
    cfg = FlowConfig(flow=flow, n_transforms=2, hidden_features=16, rank=4, max_epochs=2, patience=2)
    return FlowEstimator().fit_marginal(v[:160], v[160:], cfg, seed=0, device="cpu"), cfg, v


@pytest.mark.parametrize("flow", ["maf", "nsf"])
def test_conditional_equals_marginal_at_step_zero(flow):
    outcome, cfg, v = _trained_marginal(flow)
    marginal = outcome.model
    conditional = make_conditional(marginal, 7, cfg, seed=3)
    x = torch.as_tensor(v[:50])
    u = torch.randn(50, 7) * 10.0
    with torch.no_grad():
        lp_marg = marginal.log_prob(x)
        lp_cond = conditional.log_prob(x, context=u)
    assert_shape(lp_cond, (50,))
    assert_finite(lp_cond)
    assert torch.equal(lp_marg, lp_cond)
    # every MADE is wrapped, the marginal itself is untouched
    assert len(branches(conditional)) == cfg.n_transforms
    assert not any(isinstance(m, ConditionedMADE) for m in marginal.modules())


def test_autocast_keeps_transforms_and_log_det_in_float32():
    rng = np.random.default_rng(0)
    v = rng.standard_normal((120, 5)).astype(np.float32)
    cfg = FlowConfig(n_transforms=2, hidden_features=16, rank=4, max_epochs=1, patience=1, autocast=True)
    outcome = FlowEstimator().fit_marginal(v[:100], v[100:], cfg, seed=0, device="cpu")
    flow = outcome.model
    seen: dict[str, torch.dtype] = {}

    def record(name):
        def hook(module, inputs, output):
            seen.setdefault(name, output.dtype)

        return hook

    made = _made_transforms(flow)[0].autoregressive_net
    hooks = [
        made.initial_layer.register_forward_hook(record("layer")),
        made.register_forward_hook(record("conditioner")),
    ]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        logp = flow.log_prob(torch.as_tensor(v[:10]))
    for hook in hooks:
        hook.remove()
    assert seen == {"layer": torch.bfloat16, "conditioner": torch.float32}
    assert logp.dtype == torch.float32
    assert_finite(outcome.logp_val)
    # the conditional built from it casts its conditioners too
    conditional = make_conditional(flow, 3, cfg, seed=1)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert (
            conditional.log_prob(torch.as_tensor(v[:10]), context=torch.randn(10, 3)).dtype == torch.float32
        )


def test_gradients_reach_both_low_rank_factors():
    outcome, cfg, v = _trained_marginal()
    conditional = make_conditional(outcome.model, 7, cfg, seed=3)
    x = torch.as_tensor(v[:64])
    u = torch.randn(64, 7)
    params = list(conditional.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    loss = -conditional.log_prob(x, context=u).mean()
    loss.backward()
    for branch in branches(conditional):
        assert branch.B.weight.grad is not None and branch.B.weight.grad.abs().sum() > 0
        # B = 0, so A receives exactly zero gradient before the first step
        assert branch.A.weight.grad is not None and branch.A.weight.grad.abs().sum() == 0
    opt.step()
    opt.zero_grad()
    loss = -conditional.log_prob(x, context=u).mean()
    loss.backward()
    for branch in branches(conditional):
        assert branch.B.weight.abs().sum() > 0
        assert branch.A.weight.grad.abs().sum() > 0


def test_fit_conditional_never_worse_than_marginal_on_validation():
    outcome, cfg, v = _trained_marginal()
    rng = np.random.default_rng(1)
    u = rng.standard_normal((200, 3)).astype(np.float32)
    cond = FlowEstimator().fit_conditional(
        u[:160], v[:160], u[160:], v[160:], cfg, seed=0, marginal=outcome.model
    )
    assert_shape(cond.logp_val, (40,))
    assert_finite(cond.logp_val)
    assert cond.nll_val <= outcome.nll_val + 1e-9
    assert cond.history[0] == pytest.approx(outcome.nll_val, rel=1e-6)
    # the raw figure is the best trained epoch's, before the marginal itself may be kept
    assert cond.raw_nll_val == min(cond.history[1:])
    assert cond.nll_val <= cond.raw_nll_val + 1e-9


def test_flow_config_validation():
    with pytest.raises(ValueError, match="flow must be one of"):
        FlowConfig(flow="realnvp")
    with pytest.raises(ValueError, match="rank must be a positive integer"):
        FlowConfig(rank=0)
    with pytest.raises(ValueError, match="lr must be"):
        FlowConfig(lr=-1.0)
    with pytest.raises(ValueError, match="autocast must be True or False"):
        FlowConfig(autocast="bf16")
    with pytest.raises(ValueError, match="unknown FlowConfig fields"):
        FlowConfig.from_dict({"flow": "maf", "depth": 3})
    assert FlowConfig.from_dict(FlowConfig.fast().to_dict()) == FlowConfig.fast()


def test_evaluation_builds_no_autograd_graph():
    from flare_core.analyses.sufficiency._training import _evaluate

    model = torch.nn.Linear(3, 1)
    grad_enabled = []

    def log_prob(batch):
        grad_enabled.append(torch.is_grad_enabled())
        return model(batch[0]).squeeze(1)

    out = _evaluate(model, log_prob, [torch.randn(10, 3)], batch_size=4, autocast=False)
    assert out.shape == (10,) and out.dtype == np.float64
    assert grad_enabled == [False, False, False]
