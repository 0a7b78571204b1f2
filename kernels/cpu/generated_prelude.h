/* generated_prelude.h: the first lines of every generated pointwise kernel's source (the embedded
 * text continues with wb_kernels/generated.h, scalar_vf.inc and vecmath.inc). */
#include <math.h>
#include <stdint.h>
#include <string.h>
#define WB_VECMATH_GENERATED 1 /* vecmath.inc without its wb_cpu_act dispatch */
