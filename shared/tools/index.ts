// The tools context's public surface: first-party providers the platform serves itself (today the echo
// endpoint the x402 test and the examples call). Depends on no context.

export { buildEcho, ECHO_DEFAULT_MESSAGE } from "./echo.js";
export { EchoQuery, EchoResult, ProviderCallBody } from "./schemas.js";
