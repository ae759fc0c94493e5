"""What is not part of the running kiosk: ``kiosk bench``, the stand-in and cost-matched model
generators (tests, benchmarks) and the drawing of the README's booth pictures. The kiosk itself
never imports this package."""
