#version 450
// b[i] = a[i] ^ (i * 2654435761)
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer A { uint a[]; };
layout(std430, set = 0, binding = 1) buffer B { uint b[]; };
layout(push_constant) uniform P { uint n; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) b[i] = a[i] ^ (i * 2654435761u);
}
