service S extends {}
