#!/bin/sh
# gpu_bundle.sh: packs what scripts/gpu_check.sh needs into .gpu/ (git-ignored), so a GPU
# machine whose image has the CUDA toolkit but no Lua (the device machines here: Ubuntu, no
# package registry) can run the checks without building: the Release workbench and its CUDA
# plugin built here (and the mock, for the tests that run on it), the CUDA runtime and CUPTI the
# plugin was linked with (both redistributable under the CUDA EULA; cuBLASLt is too, but at
# ~500 MB it is taken from the GPU machine, which gpu_check.sh searches), the Lua runtime and C
# modules they load, and the pure-Lua modules.
#
#   scripts/bootstrap.sh && scripts/gpu_bundle.sh     # then carry .gpu to the GPU machine:
#   device run: command "sh scripts/gpu_check.sh", carry [".gpu"]
set -eu
cd "$(dirname "$0")/.."
[ -x build/workbench ] || { echo "gpu_bundle: build/workbench is missing: run scripts/bootstrap.sh first" >&2; exit 1; }
[ -f build/libwb_cuda.so ] || { echo "gpu_bundle: build/libwb_cuda.so is missing: the CUDA toolkit was not found" >&2; exit 1; }
rm -rf .gpu
mkdir -p .gpu/bin .gpu/lib .gpu/lua
cp build/workbench build/libwb_cuda.so build/libwb_cuda_mock.so .gpu/bin/
for lib in libcudart.so.13 libcupti.so.13; do
    path=$(ldd build/libwb_cuda.so | awk -v l="$lib" '$1 == l { print $3 }')
    [ -n "$path" ] || { echo "gpu_bundle: the plugin does not resolve $lib here" >&2; exit 1; }
    cp -L "$path" .gpu/lib/
done
# the shared libraries workbench needs that a CUDA image may lack (CUDA's own stay there)
# (the device machines' image is Ubuntu with CUDA: it need not have libseccomp or libsqlite3)
for lib in liblua5.4.so.0 libreadline.so.8 libtinfo.so.6 libgomp.so.1 libz.so.1 libseccomp.so.2 libsqlite3.so.0; do
    path=$(ldd build/workbench | awk -v l="$lib" '$1 == l { print $3 }')
    [ -n "$path" ] && cp -L "$path" .gpu/lib/
done
cp /usr/lib/x86_64-linux-gnu/lua/5.4/cjson.so .gpu/lua/
cp /usr/share/lua/5.4/argparse.lua /usr/share/lua/5.4/luaunit.lua .gpu/lua/
git rev-parse --short HEAD > .gpu/commit
du -sh .gpu
