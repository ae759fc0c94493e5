"""The staff console (``console.enabled``): a small web app on the booth network for a phone or
tablet: status at a glance, the day's counters as small plots, and the booth's controls.

- :mod:`~kiosk.console.auth`: the PIN, sessions, CSRF tokens and the per-client lockout;
- :mod:`~kiosk.console.pages`: the HTML pages and the server-rendered SVG plots;
- :mod:`~kiosk.console.server`: the aiohttp server (the keepsake server's connection guard and
  header hardening);
- :mod:`~kiosk.console.process`: that server in a child process of its own;
- :mod:`~kiosk.console.history`: the day's counters per hour, kept by the kiosk.

The kiosk's side (status out, commands in, drained by the render loop each frame) is
:mod:`kiosk.app.console_host`.
"""
