#version 330
// The camera frame, with the swapped face crops composited over it (paste-back on the GPU).
// Textures hold BGR bytes; their swizzle (set by the renderer) returns them as RGB.
//
// For each face, in publication order (a later face is blended over an earlier one, as the CPU
// paste-back does): the frame pixel (OpenCV pixel coordinates, centre of pixel i at i) goes
// through the frame->crop affine, the crop is sampled there (bilinear, like cv2.warpAffine) and
// blended with the feathered crop-space mask of kiosk/inference/paste.py:
//     edge_dist = min(u, v, size - u, size - v)    (u, v: crop coordinates, pixel centre at i + 0.5)
//     alpha     = clamp((edge_dist - margin_frac * size) / (feather_frac * size), 0, 1)

const int MAX_FACES = 32;

uniform sampler2D u_frame;
uniform vec2 u_frame_size;                 // frame width, height in pixels
uniform sampler2DArray u_crops;            // one face crop per layer, at the layer's top-left
uniform float u_crop_layer_size;           // side of a layer in texels
uniform int u_face_count;                  // 0: the frame alone
uniform vec3 u_affine_x[MAX_FACES];        // first row of each frame->crop affine
uniform vec3 u_affine_y[MAX_FACES];        // second row
uniform float u_crop_size[MAX_FACES];      // side of each crop in pixels
uniform vec2 u_mask_fracs;                 // margin_frac, feather_frac

in vec2 v_uv;
out vec4 f_color;

void main() {
    vec3 color = texture(u_frame, v_uv).rgb;
    vec3 p = vec3(v_uv * u_frame_size - 0.5, 1.0);
    for (int i = 0; i < u_face_count; ++i) {
        float size = u_crop_size[i];
        vec2 c = vec2(dot(u_affine_x[i], p), dot(u_affine_y[i], p)) + 0.5;  // crop, pixel centre at i + 0.5
        vec2 edge2 = min(c, vec2(size) - c);
        float edge = min(edge2.x, edge2.y);
        float alpha = clamp((edge - u_mask_fracs.x * size) / (u_mask_fracs.y * size), 0.0, 1.0);
        if (alpha > 0.0) {
            vec3 crop = texture(u_crops, vec3(c / u_crop_layer_size, float(i))).rgb;
            color = mix(color, crop, alpha);
        }
    }
    f_color = vec4(color, 1.0);
}
