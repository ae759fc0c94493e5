#version 330
// The frame texture holds BGR bytes; its swizzle (set by the renderer) returns them as RGB.

uniform sampler2D u_frame;

in vec2 v_uv;
out vec4 f_color;

void main() {
    f_color = vec4(texture(u_frame, v_uv).rgb, 1.0);
}
