#version 330
// Glyph coverage comes from the single-channel atlas; boxes sample its solid white block.

uniform sampler2D u_atlas;

in vec2 v_uv;
in vec4 v_color;
out vec4 f_color;

void main() {
    float coverage = texture(u_atlas, v_uv).r;
    f_color = vec4(v_color.rgb, v_color.a * coverage);
}
