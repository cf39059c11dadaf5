// Types shared by the client functions and the worker.
export {};
