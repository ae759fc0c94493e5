#version 330
// Instanced booth UI quads: rounded rectangles (solid, vertical gradient or a thumbnail from the
// thumbnail atlas), optional border and soft edge (shadows). Positions are in logical pixels (the
// upright screen, y down); u_quarter_turns rotates them onto the framebuffer like text.vert.

in vec2 in_corner;   // per vertex: (0,0) .. (1,1)
in vec4 in_rect;     // per instance: x0, y0, x1, y1 in logical pixels (the shape plus its soft edge)
in vec4 in_uv;       // u0, v0, u1, v1 in the thumbnail atlas (mode 1)
in vec4 in_color;    // fill (mode 0), tint (mode 1) or top colour (mode 2); straight RGBA
in vec4 in_color2;   // border colour (modes 0, 1) or bottom colour (mode 2)
in vec4 in_params;   // corner radius, border width, mode, soft edge width (all in logical pixels)

uniform vec2 u_logical_size;
uniform int u_quarter_turns;

out vec2 v_local;        // logical pixels from the rectangle's centre
flat out vec2 v_half;    // half size of the rectangle
out vec2 v_uv;
out float v_t;           // 0 at the top edge, 1 at the bottom
flat out vec4 v_color;
flat out vec4 v_color2;
flat out vec4 v_params;

vec2 screen_point(vec2 n, int q) {
    if (q == 1) return vec2(1.0 - n.y, n.x);
    if (q == 2) return vec2(1.0 - n.x, 1.0 - n.y);
    if (q == 3) return vec2(n.y, 1.0 - n.x);
    return n;
}

void main() {
    vec2 p = mix(in_rect.xy, in_rect.zw, in_corner);
    vec2 s = screen_point(p / u_logical_size, u_quarter_turns);
    gl_Position = vec4(s.x * 2.0 - 1.0, 1.0 - s.y * 2.0, 0.0, 1.0);
    v_half = (in_rect.zw - in_rect.xy) * 0.5;
    v_local = p - (in_rect.xy + in_rect.zw) * 0.5;
    v_uv = mix(in_uv.xy, in_uv.zw, in_corner);
    v_t = in_corner.y;
    v_color = in_color;
    v_color2 = in_color2;
    v_params = in_params;
}
