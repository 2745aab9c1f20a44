"""The hub contract suite, run unchanged through ``ok.aio`` (see ``conftest.py``)."""

from tests.contract.test_last_value import *  # noqa: F403
from tests.contract.test_post_mailbox import *  # noqa: F403
from tests.contract.test_publish_subscribe import *  # noqa: F403
from tests.contract.test_send_reply import *  # noqa: F403
from tests.contract.test_wait_for import *  # noqa: F403
