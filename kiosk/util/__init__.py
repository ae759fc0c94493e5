"""Small helpers shared by every package of the kiosk; nothing here imports the rest of the kiosk."""
