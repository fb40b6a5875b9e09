"""A version whose driver never comes up: it hangs before it creates its session (a dependency that blocks).

Takes any arguments; a standby of it never reports READY, so the upgrade must end it within its timeout.
"""

import time

time.sleep(3600)
