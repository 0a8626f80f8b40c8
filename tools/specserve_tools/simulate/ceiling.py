"""An optimistic reference for a Restart rule that does not see the future (issue 29): the replayed offline plan,
with each of its restarts held until the mode it rolls into serves more at the demand read and the regret of
staying since then reaches a share of the roll's cost.

The replayed plan (optimum.restart_optimum) knows the whole day: which regimes are long enough to repay a roll, and
when they begin, so it starts a roll about half a roll before the demand crosses. An online rule can know neither;
ski rental (policy.restart) waits until the regret of staying, summed since the other mode became the better one,
reaches a share of the roll's cost (EARLY = 0.25 for a regime it takes to be long, WAIT = 2 for one it takes to be
short), and that share is what bounds it per episode: 1 + 1 / share times what the offline optimum pays.

`HeldPlan` keeps the plan's choice of regimes (clairvoyant: it never buys a regime that will not repay) and takes
away its foresight of when they begin. A restart the plan makes is held until the target mode serves more on the
plant's true curves at the demand read and the regret since then (a CUSUM, floored at zero, as the rule's) reaches
`share` x the roll's cost there (policy.restart.switch_cost, at the demand read), and never within min dwell of the
last restart (holding a restart never adds one, so the plan's budget holds too). With share = EARLY it is an
optimistic reference for a rule with the operator's per-episode bound: one that buys only the regimes that repay,
knows the curves and buys at the least regret the bound allows; with share 0 it restarts at the crossing.
`specserve-suite --ceiling` reports these rows beside the operator's (docs/simulate.md)."""

from __future__ import annotations

from dataclasses import dataclass

from specserve.api.models import Mode
from specserve.policy.curves import ModeCurves
from specserve.policy.restart import other, pool_rate, switch_cost
from specserve.policy.types import Sample
from specserve_tools.simulate.setup import Command, Controller, Setup

SHARES = (0.0, 0.1, 0.25, 0.5)  # the shares of the roll's cost `--ceiling` holds the plan's restarts to
PREFIX = "held"  # the held plans' row names start with it


def role(share: float) -> str:
    """The suite's row name for a held plan (`held 0.25`)."""
    return f"{PREFIX} {share:g}"


def plant(setup: Setup) -> ModeCurves:
    """The curves the simulated pods serve on (the profile's), not the ones the spec gave the policy."""
    return ModeCurves(speculative=setup.profile.speculative, baseline=setup.profile.baseline)


@dataclass
class HeldPlan:
    """The replayed plan's restarts, each held until its mode is the better one and has been for `share` x the
    roll's cost in regret (module docstring)."""

    plan: Controller
    share: float
    name: str = "held plan"
    setup: Setup | None = None
    curves: ModeCurves | None = None
    mode: Mode = Mode.SPECULATIVE  # the mode the pool serves in (or rolls into)
    wanted: Mode | None = None  # the plan's restart not made yet
    regret: float = 0.0  # tokens the wanted mode would have served more since it became the better one
    last: float | None = None
    restarted: float | None = None  # when the last restart began (min dwell counts from it, as the operator's)

    def start(self, setup: Setup, demand: float | None) -> Command:
        self.setup, self.curves, self.wanted, self.regret, self.last = setup, plant(setup), None, 0.0, None
        self.restarted = None
        first = self.plan.start(setup, demand)
        self.mode = first.mode or setup.initial_mode
        return first

    def decide(self, sample: Sample, converging: bool) -> Command | None:
        assert self.setup is not None and self.curves is not None, "start() first"
        command = self.plan.decide(sample, converging)
        if command is not None and command.mode is not None:
            self.wanted, self.regret = (command.mode if command.mode is not self.mode else None), 0.0
        dt = 0.0 if self.last is None else max(0.0, sample.time - self.last)
        self.last = sample.time
        if self.wanted is None or sample.demand is None:
            return None  # unknown demand holds, as the rule's does
        n = self.setup.speculative_replicas
        gain = pool_rate(self.curves, self.wanted, sample.demand, n) - pool_rate(
            self.curves, other(self.wanted), sample.demand, n
        )
        self.regret = max(0.0, self.regret + gain * dt)
        cost = switch_cost(
            self.curves, self.mode, sample.demand, n, self.setup.profile.startup_seconds, 0, self.setup.slo.tpot
        )
        dwelling = self.restarted is not None and sample.time - self.restarted < self.setup.min_dwell
        if converging or dwelling or gain <= 0 or self.regret < self.share * cost:
            return None
        self.mode, self.wanted, self.regret, self.restarted = self.wanted, None, 0.0, sample.time
        return Command(mode=self.mode)
