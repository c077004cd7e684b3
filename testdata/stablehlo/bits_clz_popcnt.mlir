"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{arg_attrs = [{}], function_type = (tensor<64xi32>) -> tensor<i32>, res_attrs = [{jax.result_info = "result"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<64xi32>):
    %0 = "stablehlo.count_leading_zeros"(%arg0) : (tensor<64xi32>) -> tensor<64xi32>
    %1 = "stablehlo.popcnt"(%arg0) : (tensor<64xi32>) -> tensor<64xi32>
    %2 = "stablehlo.add"(%0, %1) : (tensor<64xi32>, tensor<64xi32>) -> tensor<64xi32>
    %3 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %4 = "stablehlo.reduce"(%2, %3) <{dimensions = array<i64: 0>}> ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<i32>):
      %5 = "stablehlo.add"(%arg1, %arg2) : (tensor<i32>, tensor<i32>) -> tensor<i32>
      "stablehlo.return"(%5) : (tensor<i32>) -> ()
    }) : (tensor<64xi32>, tensor<i32>) -> tensor<i32>
    "func.return"(%4) : (tensor<i32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
