"""Texture memory for Adreno: the Relax layout planner that puts conv-centred regions into packed images
(`planning.py`), the TE computes it emits (`compute.py`) and a texture TIR pipeline that produces valid OpenCL on the
stock TVM 0.27 wheel (`tir.py`). The numpy side (layouts, image geometry) is `adreno.targets.layout`; the schedule of
functions that write a packed tensor is `adreno.schedules.packed`.

Lowering. Upstream's Adreno TIR pipeline flattens texture buffers to `texture2d_load/store` and then lets
`VectorizeLoop` scalarise the 4-lane loop around them, which writes each lane as a whole pixel
(`write_imagef(img, coord, as_float4(<float>))`). `tir.widen_texture_access` (run right before VectorizeLoop)
rewrites a 4-trip loop around texture accesses into one float4 `texture2d_load` into a register array before the
loop and one float4 `texture2d_store` from a register array after it, so every pixel is a single
`read_imagef`/`write_imagef`. A store that cannot be widened is reported (`TextureLoweringError`) and the
compiler falls back to a buffer for that tensor.
"""
