"""The loopback server hookinbox's tests imitate providers' APIs with: the test kit's own
(hookinbox.testing._loopback), which the public fakes of Stripe's, GitHub's and Square's APIs
serve on."""

from hookinbox.testing._loopback import Loopback, Request, Respond, serving
from hookinbox.testing._loopback import Response as Answer

__all__ = ["Answer", "Loopback", "Request", "Respond", "serving"]
