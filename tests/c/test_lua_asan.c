/* test_lua_asan.c: proves that the sanitizer build's Lua is instrumented. It reads a closed
 * interpreter's thread on purpose; AddressSanitizer must report the read from inside Lua's own
 * code (lua_gettop in lapi.c). Debian's uninstrumented liblua5.4 would read the freed block
 * unnoticed. ctest expects the report (built only when Lua is compiled with the sanitizers). */
#include <lauxlib.h>
#include <lua.h>

int main(void) {
    lua_State *L = luaL_newstate();
    lua_State *thread = lua_newthread(L);
    lua_close(L);              /* frees the thread too */
    return lua_gettop(thread); /* the use after free */
}
