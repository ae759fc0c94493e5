"""Keepsakes: the swapped photo a visitor takes home, by QR code on the booth's own network.

:mod:`~kiosk.keepsake.store` keeps the photos (random tokens, deleted after ``keepsake.ttl_s``),
:mod:`~kiosk.keepsake.server` serves them to phones, :mod:`~kiosk.keepsake.printer` prints them and
:mod:`~kiosk.keepsake.service` wires the three for :class:`kiosk.app.KioskApp`.
"""
