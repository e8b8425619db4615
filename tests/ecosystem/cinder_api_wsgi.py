"""Cinder 29's own WSGI application (``cinder.wsgi.api``) for gunicorn, on one cinder.conf.

Cinder's WSGI module reads its options from ``sys.argv``, which under gunicorn
are gunicorn's; DevStack's uwsgi passes ``--config-file`` the same way
(``pyargv``). ``DK_CINDER_CONF`` names the file.
"""

import os
import sys

sys.argv = ["cinder-api", "--config-file", os.environ["DK_CINDER_CONF"]]

from cinder.wsgi.api import application  # noqa: E402,F401 - what gunicorn serves
