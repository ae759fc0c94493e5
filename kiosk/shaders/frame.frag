#version 330
// The camera frame, with the swapped face crops composited over it (paste-back on the GPU).
// Textures hold BGR bytes; their swizzle (set by the renderer) returns them as RGB.
//
// For each face, in publication order (a later face is blended over an earlier one, as the CPU
// paste-back does): the frame pixel (OpenCV pixel coordinates, centre of pixel i at i) goes
// through the frame->crop affine, the crop is sampled there (bilinear, like cv2.warpAffine) and
// blended with its alpha channel: the crop-space mask built by kiosk/inference/mask.py (box or
// face shape, mouth kept, occlusion), whose outermost pixel ring is always 0; so, as on the CPU
// (cv2.warpAffine with a zero border), nothing is blended beyond the outer texel centres
// (u, v outside [0.5, size - 0.5]), and texels of the layer beyond the crop are never read.

const int MAX_FACES = 32;

uniform sampler2D u_frame;
uniform vec2 u_frame_size;                 // frame width, height in pixels
uniform sampler2DArray u_crops;            // one face crop per layer, at the layer's top-left
uniform float u_crop_layer_size;           // side of a layer in texels
uniform int u_face_count;                  // 0: the frame alone
uniform vec3 u_affine_x[MAX_FACES];        // first row of each frame->crop affine
uniform vec3 u_affine_y[MAX_FACES];        // second row
uniform float u_crop_size[MAX_FACES];      // side of each crop in pixels

in vec2 v_uv;
out vec4 f_color;

void main() {
    vec3 color = texture(u_frame, v_uv).rgb;
    vec3 p = vec3(v_uv * u_frame_size - 0.5, 1.0);
    for (int i = 0; i < u_face_count; ++i) {
        float size = u_crop_size[i];
        vec2 c = vec2(dot(u_affine_x[i], p), dot(u_affine_y[i], p)) + 0.5;  // crop, pixel centre at i + 0.5
        if (all(greaterThan(c, vec2(0.5))) && all(lessThan(c, vec2(size - 0.5)))) {
            vec4 crop = texture(u_crops, vec3(c / u_crop_layer_size, float(i)));
            color = mix(color, crop.rgb, crop.a);
        }
    }
    f_color = vec4(color, 1.0);
}
