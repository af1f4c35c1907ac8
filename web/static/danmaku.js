// DanmakuClient placeholder
