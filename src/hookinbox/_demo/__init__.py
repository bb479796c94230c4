"""`hookinbox demo`: the example shop, the simulator and the exactly-once check, in one command."""

from hookinbox._demo._mailbox import Mailbox
from hookinbox._demo._run import DEFAULT_APP, DemoResult, run_demo

__all__ = ["DEFAULT_APP", "DemoResult", "Mailbox", "run_demo"]
