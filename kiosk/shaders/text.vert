#version 330
// Instanced overlay quads (glyphs and the dark boxes behind them). Positions are in logical
// pixels (the upright screen the viewer sees, y down); u_quarter_turns rotates them onto the
// framebuffer the same way frame.vert rotates the picture.

in vec2 in_corner;  // per vertex: (0,0) .. (1,1)
in vec4 in_rect;    // per instance: x0, y0, x1, y1 in logical pixels
in vec4 in_uv;      // per instance: u0, v0, u1, v1 in the atlas
in vec4 in_color;   // per instance: straight (non-premultiplied) RGBA

uniform vec2 u_logical_size;
uniform int u_quarter_turns;

out vec2 v_uv;
out vec4 v_color;

// Logical point n (normalised, y down) to the framebuffer (normalised, y down), clockwise turns.
vec2 screen_point(vec2 n, int q) {
    if (q == 1) return vec2(1.0 - n.y, n.x);
    if (q == 2) return vec2(1.0 - n.x, 1.0 - n.y);
    if (q == 3) return vec2(n.y, 1.0 - n.x);
    return n;
}

void main() {
    vec2 p = mix(in_rect.xy, in_rect.zw, in_corner) / u_logical_size;
    vec2 s = screen_point(p, u_quarter_turns);
    gl_Position = vec4(s.x * 2.0 - 1.0, 1.0 - s.y * 2.0, 0.0, 1.0);
    v_uv = mix(in_uv.xy, in_uv.zw, in_corner);
    v_color = in_color;
}
