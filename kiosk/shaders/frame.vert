#version 330
// Places the camera frame on the target framebuffer: scaled to fit (letterbox) or fill (crop,
// centred), rotated clockwise by u_quarter_turns * 90 degrees. Drawn as a 4-vertex triangle strip.

in vec2 in_corner;  // (0,0) top-left ... (1,1) bottom-right of the picture, y down

uniform vec2 u_frame_size;     // frame width, height in pixels
uniform vec2 u_target_size;    // framebuffer width, height in pixels
uniform int u_quarter_turns;   // 0..3, clockwise
uniform bool u_fill;           // false: fit (bars), true: fill (crop)

out vec2 v_uv;  // frame texture coordinates, (0,0) = first byte of the frame = top-left pixel

// Where picture point p (normalised, y down) comes from in the unrotated frame.
vec2 frame_point(vec2 p, int q) {
    if (q == 1) return vec2(p.y, 1.0 - p.x);
    if (q == 2) return vec2(1.0 - p.x, 1.0 - p.y);
    if (q == 3) return vec2(1.0 - p.y, p.x);
    return p;
}

void main() {
    vec2 shown = (u_quarter_turns % 2 == 1) ? u_frame_size.yx : u_frame_size;
    vec2 ratio = u_target_size / shown;
    float scale = u_fill ? max(ratio.x, ratio.y) : min(ratio.x, ratio.y);
    // Half extent of the picture in NDC: 1.0 means edge to edge, > 1.0 is cropped by the viewport.
    vec2 half_ndc = shown * scale / u_target_size;
    vec2 ndc = vec2(in_corner.x * 2.0 - 1.0, 1.0 - in_corner.y * 2.0) * half_ndc;
    gl_Position = vec4(ndc, 0.0, 1.0);
    v_uv = frame_point(in_corner, u_quarter_turns);
}
