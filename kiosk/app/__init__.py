"""The running kiosk: wiring of the threads and buffers, supervision, config reload, the render loop."""
