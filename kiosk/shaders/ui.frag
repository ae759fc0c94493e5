#version 330
// Rounded rectangle by its signed distance; antialiased over one pixel, or over the soft edge
// width for shadows. Modes: 0 solid, 1 thumbnail (atlas texel × tint), 2 vertical gradient.

uniform sampler2D u_thumbs;

in vec2 v_local;
flat in vec2 v_half;
in vec2 v_uv;
in float v_t;
flat in vec4 v_color;
flat in vec4 v_color2;
flat in vec4 v_params;
out vec4 f_color;

float rounded_box(vec2 p, vec2 half_size, float r) {
    vec2 q = abs(p) - half_size + r;
    return length(max(q, 0.0)) + min(max(q.x, q.y), 0.0) - r;
}

void main() {
    float soft = v_params.w;
    vec2 shape = max(v_half - soft, vec2(0.5));
    float radius = min(v_params.x, min(shape.x, shape.y));
    float d = rounded_box(v_local, shape, radius);
    float coverage = soft > 0.0 ? 1.0 - smoothstep(-soft, soft, d) : clamp(0.5 - d, 0.0, 1.0);
    int mode = int(v_params.z + 0.5);
    vec3 texel = texture(u_thumbs, v_uv).rgb;  // sampled in uniform control flow (mipmaps)
    vec4 fill = v_color;
    if (mode == 1) {
        fill = vec4(texel * v_color.rgb, v_color.a);
    } else if (mode == 2) {
        fill = mix(v_color, v_color2, v_t);
    }
    float border = v_params.y;
    if (border > 0.0 && mode != 2) {
        float inside = clamp(0.5 - (d + border), 0.0, 1.0);
        fill = mix(v_color2, fill, inside);
    }
    f_color = vec4(fill.rgb, fill.a * coverage);
}
