#version 450
// bench_vulkan's shader: does nothing, so what is measured is the layer.
layout(local_size_x = 1) in;
void main() {}
