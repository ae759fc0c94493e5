"""Display: surfaces (``window``: glfw window or EGL offscreen), the per-frame ``renderer`` (frame
fit/fill/rotation in ``shaders/frame.*``, with the face crops pasted back on the GPU by
``composite``), the ``booth_layer`` drawing a ``booth_ui.BoothView`` (carousel, banner, attract
screen, swap badge in ``shaders/ui.*``: laid out without GL by ``booth_layout``,
``booth_carousel`` and ``booth_attract`` into ``ui_quads`` rows, the thumbnails packed by
``thumb_atlas``; the GL set-up it shares with the ``keepsake_layer`` is ``ui_layer``), the text
``overlay`` drawn from a ``font_atlas``, ``shaders`` (loading the GLSL files from ``shaders/`` or
``$KIOSK_SHADERS_DIR``) and ``demo`` (offscreen screenshots of the booth UI with synthetic
pictures)."""
