"""``kreassign simulate``: run a scenario's reassignment on the simulated cluster.

Virtual time, no Kafka: the ``kreassign`` strategy is the engine's own core
loop (``engine.whatif.strategies``); ``--compare`` runs the Kafka tool's
all-at-once execution and Cruise Control's per-broker cap beside it. The
report gives the makespan against the physical lower bound
(``engine.sim.bound``), per-broker peaks, ISR safety and what producers feel
(an acks=all probe producer's latency, the seconds writes could not complete:
``engine.sim.probe``).
"""

from __future__ import annotations

import dataclasses

from engine.cli import CliError
from engine.sim import scenario as scenario_file
from engine.whatif import report
from engine.sim.bound import lower_bound
from engine.whatif.strategies import STRATEGIES, SimulationError, run as run_strategy
from engine.core.step import STEP_MODES


def add_parser(sub) -> None:
    p = sub.add_parser("simulate", help="run a scenario on the simulated cluster and report makespan, safety and what producers feel")
    p.add_argument("--scenario", required=True, metavar="FILE", help="scenario file (YAML or JSON)")
    p.add_argument("--strategy", choices=STRATEGIES, default="kreassign", help="how to run the reassignment")
    p.add_argument("--compare", action="store_true", help="run all three strategies side by side")
    p.add_argument("--steps", choices=STEP_MODES, metavar="MODE",
                   help=f"how kreassign's request steps ({', '.join(STEP_MODES)}; default: the scenario's "
                        "steps, else incremental)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default): a table, a column per strategy; json: one object with every measure (and per broker)")
    p.set_defaults(func=run)


def run(args) -> int:
    try:
        scenario = scenario_file.load(args.scenario)
    except scenario_file.ScenarioError as e:
        raise CliError(str(e)) from None
    if args.steps is not None:
        scenario = dataclasses.replace(scenario, steps=args.steps)
    bound = lower_bound(scenario)
    strategies = STRATEGIES if args.compare else (args.strategy,)
    try:
        results = [run_strategy(scenario, s) for s in strategies]
    except SimulationError as e:
        raise CliError(f"{args.scenario}: {e}") from None
    print(report.as_json(scenario, bound, results) if args.format == "json" else report.text(scenario, bound, results))
    return 0
