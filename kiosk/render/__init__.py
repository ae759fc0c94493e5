"""Display: surfaces (``window``: glfw window or EGL offscreen), the per-frame ``renderer`` (frame
fit/fill/rotation in ``shaders/frame.*``), the text ``overlay`` drawn from a ``font_atlas``, and
``shaders`` (loading the GLSL files from ``shaders/`` or ``$KIOSK_SHADERS_DIR``)."""
