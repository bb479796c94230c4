"""`hookinbox simulate`: deliveries as the providers make them, against any webhook endpoint.

    config = SimulationConfig(provider="stripe", secret="whsec_...", target="http://.../stripe")
    report = simulate(config)                       # or: await run_simulation(config)
    wait_until_drained(database_url, timeout=60)    # hookinbox receivers: processing done
    result = verify(report, database_url)           # lost 0, doubled 0, invalid_accepted 0?

The modules, in the order a run uses them: `_events` (realistic bodies per provider),
`_signing` (each provider's signature, by `hookinbox.testing`'s signers), `_plan` (what is
sent when, from one seed), `_sender` (HTTP, retries on the provider's schedule, lost
responses), `_report` (statistics and the ledger a correct receiver must match), `_verify`
(that match, read from a database, judged by the oracle `check_exactly_once` shares).
"""

from hookinbox._extras import importing

with importing("hookinbox.simulate", "simulate"):  # httpx and rich: the [simulate] extra
    from hookinbox.simulate._config import SimulationConfig
    from hookinbox.simulate._plan import Plan, PlannedDelivery, build_plan
    from hookinbox.simulate._report import Latency, SimulationReport
    from hookinbox.simulate._run import TargetUnreachable, run_simulation, simulate
    from hookinbox.simulate._verify import Verification, verify, wait_until_drained

__all__ = [
    "Latency",
    "Plan",
    "PlannedDelivery",
    "SimulationConfig",
    "SimulationReport",
    "TargetUnreachable",
    "Verification",
    "build_plan",
    "run_simulation",
    "simulate",
    "verify",
    "wait_until_drained",
]
